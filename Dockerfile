# mnemo: one image for every production role. The command picks the role:
#   docker run IMAGE migrate | worker | api | keys create --tenant T --user U
# Configuration comes from MNEMO_* environment variables (api/settings.py).

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/mnemo
WORKDIR /src
# Only what the package build needs (no .venv, tests or local data in the image).
COPY pyproject.toml README.md ./
COPY activities ./activities
COPY api ./api
COPY memory ./memory
COPY migrations ./migrations
COPY workflows ./workflows
RUN /opt/mnemo/bin/pip install .

FROM python:3.11-slim
ENV PATH=/opt/mnemo/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/mnemo /opt/mnemo
RUN useradd --create-home --uid 10001 mnemo
USER mnemo
WORKDIR /home/mnemo
EXPOSE 8000
ENTRYPOINT ["mnemo"]
CMD ["--help"]
