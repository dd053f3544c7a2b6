"""Developer tools, not run by any process of the service: :mod:`.schema_dump` regenerates
``sql/schema.sql`` from the migrations, :mod:`.config_reference` ``docs/configuration.md`` from
the settings' metadata."""
