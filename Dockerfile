# Build stage: all dependencies, src/ bundled into dist/ by esbuild (npm run build).
# The same Node as package.json's `node` devDependency (the runtime image has it, so --omit=dev skips the package).
FROM node:26.10.0-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY scripts ./scripts
COPY src ./src
COPY migrations ./migrations
RUN npm run build

# Runtime: production dependencies and the bundle; plain node runs JavaScript (no TypeScript
# transform in the process: ~77 MB less per process than node --import=tsx src/main.ts).
FROM node:26.10.0-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY policies ./policies
# The sources stay for `node --import=tsx src/cli/manage.ts` (tsx is a production dependency);
# `node dist/manage.js` is the same CLI, compiled.
COPY tsconfig.json ./
COPY src ./src
COPY migrations ./migrations
RUN mkdir -p /var/lib/keystone-gateway && chown node:node /var/lib/keystone-gateway
ENV NODE_ENV=production HOST=0.0.0.0 PORT=5000 DATA_DIR=/var/lib/keystone-gateway
EXPOSE 5000
USER node
# The node flags of `npm start` (package.json; test/runtime.test.ts keeps the two the same): a young
# generation of 16 MB semi-spaces that neither shrinks when idle nor grows to Node 26's 32 MB
# (bench/README.md, 2026-11-29), and V8's compiler memory in its own pooled pages instead of the
# threads' malloc arenas, which kept 18-23 MB per process (2026-11-30); V8 gives pooled pages back to
# the system 1-2 s after they are freed instead of 8-16 s (2026-11-30, third sitting); and no memory
# reducer, whose watchdog compacted the whole heap under load, a 47 ms pause (2026-12-04, fifth sitting).
CMD ["node", "--min-semi-space-size=16", "--max-semi-space-size=16", "--managed-zone-memory", "--memory-pool-timeout=1", "--no-memory-reducer", "dist/main.js"]
