import type { IncomingMessage, ServerResponse } from 'node:http';
import t from 'tap';
import { ProxiedRequest } from '../../src/gateway/proxied-request.ts';
import { PublicUrl } from '../../src/gateway/public-url.ts';
import { UpstreamRequests } from '../../src/gateway/upstream-request.ts';
import type { TokenContext } from '../../src/token/token-service.ts';

// What the upstream request is built from: the client's headers minus forgeable ones, and the
// token's identity headers, prepared once per validated token where they can be.

function tokenContext(userName: string): TokenContext {
  return {
    id: 'token',
    methods: ['password'],
    user: { id: 'u1', name: userName, domainId: 'default', domainName: 'Default', passwordExpiresAt: null },
    scope: { type: 'project', project: { id: 'p1', name: 'demo', domainId: 'default', domainName: 'Default' } },
    roles: [{ id: 'r1', name: 'member' }],
    auditIds: ['audit'],
    issuedAt: 0,
    expiresAt: 0,
  } as TokenContext;
}

function proxied(user: TokenContext, service?: TokenContext): ProxiedRequest {
  const request = {
    headers: { host: 'gateway.example', 'x-auth-token': 'token', 'x-user-name': 'forged', accept: 'application/json' },
    socket: { remoteAddress: '192.0.2.7' },
  } as unknown as IncomingMessage;
  const request_ = new ProxiedRequest(request, {} as ServerResponse, false);
  request_.route = { target: { segments: ['x'], path: '/x', encodedPath: '/x', query: '' }, serviceType: 'echo', path: '/x', encodedPath: '/x' };
  request_.caller = { user, service, privilegedService: false };
  request_.upstream = { serviceType: 'echo', endpointId: 'e1', origin: 'http://127.0.0.1:9', host: '127.0.0.1:9', basePath: '' };
  return request_;
}

/** Every header the target sends, as the lines the upstream receives (list first, then the prepared lines). */
function lines(target: ReturnType<UpstreamRequests['build']>): string[] {
  const sent: string[] = [];
  for (let index = 0; index < target.headers.length; index += 2) sent.push(`${target.headers[index]}: ${target.headers[index + 1]}`);
  return [...sent, ...(target.preparedHeaders?.lines.split('\r\n').filter(Boolean) ?? [])];
}

const requests = () => new UpstreamRequests(new PublicUrl('http://gateway.example', false), []);

t.test("a user token's identity headers are prepared once and go as the same lines on every request", async (t) => {
  const builder = requests();
  const user = tokenContext('alice');
  const first = builder.build(proxied(user), undefined);
  const second = builder.build(proxied(user), undefined);
  t.ok(first.preparedHeaders, 'prepared');
  t.equal(second.preparedHeaders, first.preparedHeaders, 'the same prepared lines: not written again');
  t.notOk(first.headers.includes('x-user-id'), 'not in the list as well');
  const sent = lines(second);
  t.same(
    sent.filter((line) => /^x-(identity-status|user|roles|project|is-admin)/.test(line)),
    [
      'x-identity-status: Confirmed',
      'x-user-id: u1',
      'x-user-name: alice',
      'x-user-domain-id: default',
      'x-user-domain-name: Default',
      'x-roles: member',
      'x-project-id: p1',
      'x-project-name: demo',
      'x-project-domain-id: default',
      'x-project-domain-name: Default',
      'x-is-admin-project: True',
    ],
    'each identity header once, the forged x-user-name gone',
  );
  t.ok(sent.includes('accept: application/json'), "the client's own headers kept");
  t.equal(builder.build(proxied(tokenContext('alice')), undefined).preparedHeaders === first.preparedHeaders, false, 'another validated context: its own lines');
});

t.test('identity headers that cannot be prepared go in the list, where the pool refuses them as before', async (t) => {
  const target = requests().build(proxied(tokenContext('line\r\nx-injected: yes')), undefined);
  t.equal(target.preparedHeaders, undefined);
  const at = target.headers.indexOf('x-user-name');
  t.ok(at >= 0, 'x-user-name is in the list');
  t.equal(target.headers[at + 1], 'line\r\nx-injected: yes', 'unchanged: the pool refuses the request (test/gateway/upstream-pool.test.ts)');
  t.ok(at >= target.checkedHeaders!, 'after the entries the pool takes as checked, so it tests them');
});

t.test('the entries the pool takes as checked: the client\'s headers and what the gateway made of them, no more', async (t) => {
  for (const [name, target] of [
    ['user token', requests().build(proxied(tokenContext('alice')), '{"catalog":[]}')],
    ['service token', requests().build(proxied(tokenContext('alice'), tokenContext('nova')), undefined)],
  ] as const) {
    const checked = target.headers.slice(0, target.checkedHeaders);
    t.same(
      checked,
      ['x-auth-token', 'token', 'accept', 'application/json', 'x-forwarded-for', '192.0.2.7', 'x-forwarded-proto', 'http', 'x-forwarded-host', 'gateway.example', 'host', '127.0.0.1:9', 'x-openstack-request-id', target.responseHeaders[1]],
      `${name}: node's parser read them, or the gateway wrote them from the socket, the catalog's URL and its request id`,
    );
    const rest: string[] = [];
    for (let index = target.checkedHeaders!; index < target.headers.length; index += 2) rest.push(target.headers[index] as string);
    t.ok(rest.every((header) => /^(x-(service-)?(identity-status|user-|project-|domain-|roles|is-admin-project)|openstack-system-scope|x-service-catalog)/.test(header)), `${name}: identity and catalog headers come after, checked: ${rest.join(' ')}`);
  }
});

t.test("with a service token both tokens' headers go in the list, per request", async (t) => {
  const target = requests().build(proxied(tokenContext('alice'), tokenContext('nova')), undefined);
  t.equal(target.preparedHeaders, undefined);
  const sent = lines(target);
  t.ok(sent.includes('x-user-name: alice'));
  t.ok(sent.includes('x-service-user-name: nova'));
  t.ok(sent.includes('x-service-identity-status: Confirmed'));
});
