# One image for every tracker service (collector, migration, rollup, dashboard); the
# command picks the role (see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Build and install the wheel (not editable: it carries migrations/ and dashboard/ inside the
# tracker package), then drop the sources. Every service's extra: server (collector),
# dashboard (Streamlit), postgres (psycopg, ADBC); not spark (a 450 MB PySpark without Java
# here: Spark jobs run on a Spark cluster, not in this image).
WORKDIR /src
COPY pyproject.toml setup.py README.md LICENSE ./
COPY tracker ./tracker
COPY migrations ./migrations
COPY dashboard ./dashboard
RUN pip install '/src[server,dashboard,postgres]' \
    && rm -rf /src \
    && useradd --system --uid 10001 --home-dir /app tracker

WORKDIR /app
USER tracker
EXPOSE 8000 8501
CMD ["tracker", "serve", "--host", "0.0.0.0", "--port", "8000"]
