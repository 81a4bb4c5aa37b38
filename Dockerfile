# One image for every writegate process; the command picks which:
#   docker run IMAGE start      control plane (default)
#   docker run IMAGE proxy      gate-proxy sidecar
#   docker run IMAGE injector   Kubernetes admission webhook
#   docker run IMAGE migrate    apply database migrations and exit

FROM node:26-trixie-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# patches/: fixes to dependencies, applied by npm ci (postinstall: patch-package).
COPY patches ./patches
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# The build also copies the portal's stylesheet and script beside its compiled code.
RUN npm run build

FROM node:26-trixie-slim AS runtime
# iptables is for the injector's enforce init container (writegate.io/enforce), which runs this
# image as root with NET_ADMIN; every other process runs as the unprivileged user below.
# ca-certificates: the system CAs the injector's CA-bundle init container joins with the
# interception CA (writegate.io/tls-ca-secret), and the roots upstream TLS is verified against.
RUN apt-get update && apt-get install -y --no-install-recommends iptables ca-certificates \
  && rm -rf /var/lib/apt/lists/*
# The settings file listens on loopback only; a container listens on every interface (the
# proxy on :: for both families). The chart sets these too, from its values.
ENV NODE_ENV=production \
    WRITEGATE_CONFIG=/app/config/writegate.yaml \
    WRITEGATE_DATA_DIR=/var/lib/writegate \
    WRITEGATE_HOST=:: \
    WRITEGATE_PROXY_HOST=:: \
    WRITEGATE_METRICS_HOST=:: \
    WRITEGATE_INJECTOR_HOST=::
WORKDIR /app
COPY package.json package-lock.json ./
COPY patches ./patches
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY config ./config
# Writable state lives only in the data volume and /tmp, so the root filesystem can be read-only.
RUN mkdir -p /var/lib/writegate && chown node:node /var/lib/writegate
# Numeric (the node user), so Kubernetes can verify runAsNonRoot.
USER 1000:1000
EXPOSE 8080 8443 15001 9464
VOLUME ["/var/lib/writegate"]
# WRITEGATE_HEALTH_URL picks the process (the injector: https://127.0.0.1:8443/healthz). Its
# certificate is not checked: this asks a loopback socket whether it is alive, nothing more.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "const u=new URL(process.env.WRITEGATE_HEALTH_URL||'http://127.0.0.1:'+(process.env.WRITEGATE_HEALTH_PORT||process.env.WRITEGATE_PORT||8080)+'/healthz');require(u.protocol==='https:'?'node:https':'node:http').get(u,{rejectUnauthorized:false,timeout:2500},r=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1)).on('timeout',()=>process.exit(1))"]
ENTRYPOINT ["node", "dist/cli/main.js"]
CMD ["start"]
