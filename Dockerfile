# One image for every tracker service (collector, migration, rollup, dashboard); the
# command picks the role (see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY tracker ./tracker
COPY migrations ./migrations
COPY dashboard ./dashboard
# editable: tracker finds migrations/ and dashboard/ next to its package
RUN pip install -e . \
    && useradd --system --uid 10001 --home-dir /app tracker

USER tracker
EXPOSE 8000 8501
CMD ["tracker", "serve", "--host", "0.0.0.0", "--port", "8000"]
