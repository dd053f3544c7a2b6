-- 010: a workspace whose stored token a worker cannot decrypt (DEBOUNCE_SECRET_KEY unset in
-- that worker, or a key that does not decrypt it). A configuration problem, not a failing
-- page: while credentials_error is set the claim and the enumerations skip the workspace (its
-- jobs wait with their attempts intact); a worker whose key decrypts the token clears it (at
-- start, and every half minute), and storing new credentials clears it.
alter table workspaces add column credentials_error    text;
alter table workspaces add column credentials_error_at timestamptz;
