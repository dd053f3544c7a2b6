# The service's image: the pinned dependencies (requirements.lock, hash-checked) and the
# project in a venv, run as a non-root user. One image, the Procfile's three processes:
#   docker run IMAGE                      web (the default: the Procfile's web line)
#   docker run IMAGE debounce worker      worker (as many as you like)
#   docker run IMAGE debounce migrate     release (once per deploy, before the others)
# Configuration is the environment (docs/configuration.md): DATABASE_URL, the tokens, …
# docs/deploying.md, "A container image".

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/debounce
WORKDIR /src
COPY requirements.lock ./
RUN /opt/debounce/bin/pip install --require-hashes --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY debounce ./debounce
COPY integrations ./integrations
COPY standins ./standins
COPY sql ./sql
COPY examples ./examples
RUN /opt/debounce/bin/pip install --no-deps . && /opt/debounce/bin/pip check

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin debounce
COPY --from=build /opt/debounce /opt/debounce
ENV PATH=/opt/debounce/bin:$PATH PYTHONUNBUFFERED=1 PORT=8000
USER debounce
WORKDIR /home/debounce
EXPOSE 8000
CMD ["sh", "-c", "exec uvicorn debounce.web:app --host 0.0.0.0 --port $PORT --no-access-log --proxy-headers --forwarded-allow-ips \"${FORWARDED_ALLOW_IPS:-*}\""]
