FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY migrations ./migrations
COPY policies ./policies
RUN mkdir -p /var/lib/keystone-gateway && chown node:node /var/lib/keystone-gateway
ENV NODE_ENV=production HOST=0.0.0.0 PORT=5000 DATA_DIR=/var/lib/keystone-gateway
EXPOSE 5000
USER node
CMD ["node", "--import=tsx", "src/main.ts"]
