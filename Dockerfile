# One image for every writegate process; the command picks which:
#   docker run IMAGE start      control plane (default)
#   docker run IMAGE proxy      gate-proxy sidecar
#   docker run IMAGE injector   Kubernetes admission webhook
#   docker run IMAGE migrate    apply database migrations and exit

FROM node:26-trixie-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

FROM node:26-trixie-slim AS runtime
ENV NODE_ENV=production \
    WRITEGATE_CONFIG=/app/config/writegate.yaml \
    WRITEGATE_DATA_DIR=/var/lib/writegate
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY config ./config
# Writable state lives only in the data volume and /tmp, so the root filesystem can be read-only.
RUN mkdir -p /var/lib/writegate && chown node:node /var/lib/writegate
USER node
EXPOSE 8080 15001 9464
VOLUME ["/var/lib/writegate"]
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.WRITEGATE_HEALTH_PORT||process.env.WRITEGATE_PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "dist/cli/main.js"]
CMD ["start"]
