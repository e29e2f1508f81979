// The gateway's refusal and forwarding suites once more with the request front off
// (GATEWAY_REQUEST_FRONT=false): node:http then reads every request, as it does the ones the front
// hands over. Both ways must refuse, strip and forward alike (the suites run with the front on by
// default, which is how the service starts). The header and streaming suites: node-http-front-headers.test.ts
// (one file for all six took ~210 s of tap's 240 s per file on a slow CI machine).
process.env.TEST_GATEWAY_REQUEST_FRONT = 'false';
await import('./refusals.test.ts');
await import('./forwarding.test.ts');
