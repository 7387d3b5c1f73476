# ABC in a container: `abc` is the entrypoint (serve, core, gateway, migrate, …).
# Multi-stage: the build stage installs the production dependencies; the
# runtime stage runs as the unprivileged `node` user under tini, which as
# PID 1 forwards SIGTERM to ABC (which drains and exits) and reaps children.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY tsconfig.json ./
COPY bin bin
COPY src src
COPY gateway gateway
COPY gen gen
COPY packs packs
COPY contracts contracts
COPY assemblies assemblies
COPY workflows workflows

FROM node:24-bookworm-slim
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=build --chown=node:node /app /app
USER node
ENV NODE_ENV=production \
    ABC_HTTP_ADDR=0.0.0.0:8080 \
    ABC_GRPC_ADDR=0.0.0.0:50051 \
    ABC_DATA_DIR=/home/node/.abc
EXPOSE 8080 50051 9464
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/bin/abc.js"]
CMD ["serve"]
