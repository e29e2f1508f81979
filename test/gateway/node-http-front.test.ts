// The gateway's refusal, forwarding, header and streaming suites once more with the request front off
// (GATEWAY_REQUEST_FRONT=false): node:http then reads every request, as it does the ones the front
// hands over. Both ways must refuse, strip and forward alike (the suites run with the front on by
// default, which is how the service starts).
process.env.TEST_GATEWAY_REQUEST_FRONT = 'false';
await import('./refusals.test.ts');
await import('./forwarding.test.ts');
await import('./header-families.test.ts');
await import('./forwarded-headers.test.ts');
await import('./trust-headers.test.ts');
await import('./streaming.test.ts');
