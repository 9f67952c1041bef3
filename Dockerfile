FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY pyproject.toml README.md ./
COPY memoryd ./memoryd
RUN pip install --no-cache-dir '.[flower,server,mcp,otel]'
USER nobody
CMD ["memoryd", "worker"]
