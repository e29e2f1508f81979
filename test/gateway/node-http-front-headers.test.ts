// The gateway's header and streaming suites once more with the request front off
// (GATEWAY_REQUEST_FRONT=false), as node-http-front.test.ts does for refusals and forwarding:
// node:http then reads every request, as it does the ones the front hands over.
process.env.TEST_GATEWAY_REQUEST_FRONT = 'false';
await import('./header-families.test.ts');
await import('./forwarded-headers.test.ts');
await import('./trust-headers.test.ts');
await import('./streaming.test.ts');
