import t from 'tap';
import { ADMIN_PASSWORD, PUBLIC_URL, startTestApp } from '../helpers/app.ts';
import { call, passwordAuth } from '../helpers/keystone-client.ts';
import { PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';

// The policy store (/v3/policies) and OS-ENDPOINT-POLICY (issue 20 item 2), over HTTP, against this
// service and against the real Keystone 22 (../shared/peers/keystone/start.sh; that half is skipped
// without a peer): the same requests, the same statuses, messages, keys and links. Ids become labels.
// Lists of endpoints are compared as sorted multisets (Keystone lists them in storage order).
// Everything the run makes is removed at the end, associations first (Keystone 22 never removes an
// association by itself: see docs/compatibility.md).

/** What one request answered. */
interface Seen {
  status: number;
  /** The error message (schema failures: the first line, or only the field), or what the body showed. */
  said: unknown;
}

/** `links` point at `linkBase` (this service's PUBLIC_URL, or the peer's address). */
async function scenario(base: string, adminPassword: string, linkBase = base): Promise<Record<string, Seen>> {
  const prefix = `policies-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const login = await call(`${base}/v3/auth/tokens`, {
    method: 'POST',
    body: passwordAuth({ name: 'admin', domainId: 'default' }, adminPassword, { project: { name: 'admin', domain: { id: 'default' } } }),
  });
  if (login.status !== 201) throw new Error(`admin login: ${login.status}`);
  const api = (method: string, path: string, body?: unknown) => call(`${base}${path}`, { method, token: login.token, ...(body === undefined ? {} : { body }) });
  const labels = new Map<string, string>();
  const label = (id: string, name: string) => {
    labels.set(id, name);
    return id;
  };
  const plain = (value: unknown): unknown => {
    let text = JSON.stringify(value ?? null).split(linkBase).join('<base>');
    for (const [id, name] of labels) text = text.split(id).join(name);
    return JSON.parse(text.split(prefix).join('~'));
  };
  /** An entity: its keys, and its values but those that differ by nature (none here once ids are labels). */
  const shape = (entity: Record<string, unknown>) => plain(Object.fromEntries(Object.entries(entity).sort(([a], [b]) => a.localeCompare(b))));
  const seen: Record<string, Seen> = {};
  /** `name` labels what the answer created before it is shown. */
  const ask = async (step: string, method: string, path: string, body?: unknown, show?: (body: any) => unknown, name?: string) => {
    const answer = await api(method, path, body);
    if (name && answer.status === 201) label(answer.body.policy.id, name);
    const error = answer.body?.error as { message: string } | undefined;
    let said: unknown = null;
    if (error) {
      const first = error.message.split('\n')[0]!;
      said = plain(first.startsWith('Invalid input for field') ? first.split(':')[0] : first);
    } else if (show && answer.body !== undefined) said = show(answer.body);
    seen[step] = { status: answer.status, said };
    return answer;
  };
  const r = (name: string) => `${prefix}-${name}`;
  const endpointIds = (body: any) => (plain((body.endpoints as { id: string }[]).map((endpoint) => endpoint.id)) as string[]).sort();
  const policyIds = (body: any) => (plain((body.policies as { id: string }[]).map((policy) => policy.id)) as string[]).sort();

  const must = async (method: string, path: string, body?: unknown) => {
    const answer = await api(method, path, body);
    if (answer.status >= 300) throw new Error(`${method} ${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body;
  };
  const service = label((await must('POST', '/v3/services', { service: { type: r('type'), name: r('svc') } })).service.id, 'S');
  await must('POST', '/v3/regions', { region: { id: r('top') } });
  await must('POST', '/v3/regions', { region: { id: r('mid'), parent_region_id: r('top') } });
  const endpoint = async (name: string, iface: string, region?: string) =>
    label(
      (await must('POST', '/v3/endpoints', { endpoint: { service_id: service, interface: iface, url: `http://${name}.test/`, tier: 'x', ...(region ? { region_id: r(region) } : {}) } })).endpoint.id,
      name,
    );
  const eMid = await endpoint('eMid', 'public', 'mid');
  const eTop = await endpoint('eTop', 'admin', 'top');
  const eNone = await endpoint('eNone', 'internal');
  const policies: string[] = [];
  const targets = [`endpoints/${eMid}`, `endpoints/${eTop}`, `endpoints/${eNone}`, `services/${service}`, `services/${service}/regions/${r('top')}`, `services/${service}/regions/${r('mid')}`];
  try {
    // ---- policies -----------------------------------------------------------------------------
    await ask('create without blob', 'POST', '/v3/policies', { policy: { type: 't' } });
    await ask('create without type', 'POST', '/v3/policies', { policy: { blob: 'x' } });
    await ask('create without policy', 'POST', '/v3/policies', {});
    await ask('create blob not a string', 'POST', '/v3/policies', { policy: { blob: 1, type: 't' } });
    await ask('create type not a string', 'POST', '/v3/policies', { policy: { blob: 'x', type: 1 } });
    await ask('create type null', 'POST', '/v3/policies', { policy: { blob: 'x', type: null } });
    await ask('create type too long', 'POST', '/v3/policies', { policy: { blob: 'x', type: 'a'.repeat(256) } });
    await ask('create policy a string', 'POST', '/v3/policies', { policy: 'x' });
    await ask('create policy null', 'POST', '/v3/policies', { policy: null });
    await ask('create policy a list', 'POST', '/v3/policies', { policy: [1, 'a', true] });
    const a = await ask('create A', 'POST', '/v3/policies', { policy: { blob: '{"a": 1}', type: r('json'), owner: 'ops' } }, (body) => shape(body.policy), 'pA');
    const pA = a.body.policy.id as string;
    policies.push(pA);
    const b = await ask('create B', 'POST', '/v3/policies', { policy: { blob: 'B', type: r('text'), id: 'mine', links: { self: 'x' }, extra: 'e' } }, (body) => shape(body.policy), 'pB');
    const pB = b.body.policy.id as string;
    policies.push(pB);
    await ask('get A', 'GET', `/v3/policies/${pA}`, undefined, (body) => shape(body.policy));
    await ask('get unknown', 'GET', `/v3/policies/${r('nope')}`);
    await ask('list by type', 'GET', `/v3/policies?type=${r('text')}`, undefined, (body) => ({ ids: policyIds(body), links: plain(body.links) }));
    await ask('list by type prefix', 'GET', `/v3/policies?type__startswith=${prefix}`, undefined, policyIds);
    await ask('list by empty type', 'GET', '/v3/policies?type=', undefined, policyIds);
    await ask('list by repeated type', 'GET', `/v3/policies?type=${r('text')}&type=${r('text')}`, undefined, policyIds);
    await ask('list by two types', 'GET', `/v3/policies?type=${r('text')}&type=${r('json')}`, undefined, policyIds);
    await ask('list by two type prefixes', 'GET', `/v3/policies?type__startswith=${prefix}&type__startswith=${r('t')}`, undefined, policyIds);
    await ask('list by type and prefix', 'GET', `/v3/policies?type=${r('json')}&type__startswith=${r('t')}`, undefined, policyIds);
    await ask('update nothing', 'PATCH', `/v3/policies/${pA}`, { policy: {} });
    await ask('update without policy', 'PATCH', `/v3/policies/${pA}`, {});
    await ask('update type null', 'PATCH', `/v3/policies/${pA}`, { policy: { type: null } });
    await ask('update policy a string', 'PATCH', `/v3/policies/${pA}`, { policy: "it's" });
    await ask('update id', 'PATCH', `/v3/policies/${pA}`, { policy: { id: 'other' } });
    await ask('update id of unknown', 'PATCH', `/v3/policies/${r('nope')}`, { policy: { id: 'other' } });
    await ask('update unknown', 'PATCH', `/v3/policies/${r('nope')}`, { policy: { blob: 'x' } });
    await ask('update same id', 'PATCH', `/v3/policies/${pA}`, { policy: { id: pA, blob: 'A', level: 2, owner: null } }, (body) => shape(body.policy));
    await ask('delete unknown', 'DELETE', `/v3/policies/${r('nope')}`);

    // ---- associations -------------------------------------------------------------------------
    const ep = (policy: string) => `/v3/policies/${policy}/OS-ENDPOINT-POLICY`;
    const effective = (endpointId: string) => `/v3/endpoints/${endpointId}/OS-ENDPOINT-POLICY/policy`;
    const blobOf = (body: any) => body.policy.blob;
    await ask('no association: check', 'GET', `${ep(pA)}/endpoints/${eMid}`);
    await ask('no association: head', 'HEAD', `${ep(pA)}/services/${service}`);
    await ask('no association: delete', 'DELETE', `${ep(pA)}/services/${service}/regions/${r('mid')}`);
    await ask('no association: effective', 'GET', effective(eMid));
    await ask('no association: endpoints', 'GET', `${ep(pA)}/endpoints`, undefined, (body) => ({ ids: endpointIds(body), links: plain(body.links) }));
    for (const method of ['PUT', 'GET', 'DELETE']) {
      await ask(`${method} unknown policy`, method, `/v3/policies/${r('nope')}/OS-ENDPOINT-POLICY/endpoints/${r('nope')}`);
      await ask(`${method} unknown endpoint`, method, `${ep(pA)}/endpoints/${r('nope')}`);
      await ask(`${method} unknown service`, method, `${ep(pA)}/services/${r('nope')}/regions/${r('nope')}`);
      await ask(`${method} unknown region`, method, `${ep(pA)}/services/${service}/regions/${r('nope')}`);
    }
    await ask('effective of unknown endpoint', 'GET', effective(r('nope')));
    await ask('endpoints of unknown policy', 'GET', `/v3/policies/${r('nope')}/OS-ENDPOINT-POLICY/endpoints`);

    await ask('service → A', 'PUT', `${ep(pA)}/services/${service}`);
    await ask('service → A: check', 'GET', `${ep(pA)}/services/${service}`);
    await ask('service → A: head', 'HEAD', `${ep(pA)}/services/${service}`);
    await ask('service → A: endpoints', 'GET', `${ep(pA)}/endpoints`, undefined, (body) => ({
      ids: endpointIds(body),
      eMid: shape(body.endpoints.find((entry: { id: string }) => entry.id === eMid)),
    }));
    await ask('service → A: effective of eMid', 'GET', effective(eMid), undefined, (body) => shape(body.policy));
    await ask('service → A: head effective', 'HEAD', effective(eMid));
    await ask('top → B', 'PUT', `${ep(pB)}/services/${service}/regions/${r('top')}`);
    for (const [name, id] of [['eMid', eMid], ['eTop', eTop], ['eNone', eNone]] as const) await ask(`top → B: effective of ${name}`, 'GET', effective(id), undefined, blobOf);
    await ask('top → B: endpoints of B', 'GET', `${ep(pB)}/endpoints`, undefined, endpointIds);
    await ask('mid → A', 'PUT', `${ep(pA)}/services/${service}/regions/${r('mid')}`);
    for (const [name, id] of [['eMid', eMid], ['eTop', eTop]] as const) await ask(`mid → A: effective of ${name}`, 'GET', effective(id), undefined, blobOf);
    await ask('mid → A: endpoints of A', 'GET', `${ep(pA)}/endpoints`, undefined, endpointIds);
    await ask('eNone → B', 'PUT', `${ep(pB)}/endpoints/${eNone}`);
    await ask('eNone → B: effective', 'GET', effective(eNone), undefined, blobOf);
    await ask('eNone → B: check with A', 'GET', `${ep(pA)}/endpoints/${eNone}`);
    await ask('eNone → B: endpoints of B', 'GET', `${ep(pB)}/endpoints`, undefined, endpointIds);
    await ask('top → A (replaces B)', 'PUT', `${ep(pA)}/services/${service}/regions/${r('top')}`);
    await ask('top: check with B', 'GET', `${ep(pB)}/services/${service}/regions/${r('top')}`);
    await ask('top: check with A', 'GET', `${ep(pA)}/services/${service}/regions/${r('top')}`);
    await ask('top: delete with B', 'DELETE', `${ep(pB)}/services/${service}/regions/${r('top')}`);
    await ask('top: still A', 'GET', `${ep(pA)}/services/${service}/regions/${r('top')}`);
    await ask('top: delete with A', 'DELETE', `${ep(pA)}/services/${service}/regions/${r('top')}`);
    await ask('top: gone', 'GET', `${ep(pA)}/services/${service}/regions/${r('top')}`);

    // A region deleted and made again: Keystone 22 keeps the association (a difference).
    await must('DELETE', `/v3/endpoints/${eMid}`);
    await ask('delete region mid', 'DELETE', `/v3/regions/${r('mid')}`);
    await must('POST', '/v3/regions', { region: { id: r('mid'), parent_region_id: r('top') } });
    await ask('mid made again: association', 'GET', `${ep(pA)}/services/${service}/regions/${r('mid')}`);
  } finally {
    // Associations first (Keystone leaves them behind otherwise), then the policies, the service
    // (its endpoints go with it) and the regions.
    for (const policy of policies) for (const target of targets) await api('DELETE', `/v3/policies/${policy}/OS-ENDPOINT-POLICY/${target}`);
    for (const policy of policies) await api('DELETE', `/v3/policies/${policy}`);
    await api('DELETE', `/v3/services/${service}`);
    await api('DELETE', `/v3/regions/${r('mid')}`);
    await api('DELETE', `/v3/regions/${r('top')}`);
  }
  return seen;
}

const required = (name: string) => ({ status: 400, said: `'${name}' is a required property` });
const invalid = (field: string) => ({ status: 400, said: `Invalid input for field '${field}'` });
const notFound = (kind: string, id: string) => ({ status: 404, said: `Could not find ${kind}: ${id}.` });
const noAssociation = { status: 404, said: 'Could not find policy association.' };
const done = { status: 204, said: null };
const policyA = (extra: Record<string, unknown>) => ({ ...extra, blob: '{"a": 1}', id: 'pA', links: { self: '<base>/v3/policies/pA' }, type: '~-json' });

/** What Keystone 22 answered (asked on 2026-11-27), and what this service must answer too. */
const KEYSTONE: Record<string, Seen> = {
  'create without blob': required('blob'),
  'create without type': required('type'),
  'create without policy': required('blob'),
  'create blob not a string': invalid('blob'),
  'create type not a string': invalid('type'),
  'create type null': invalid('type'),
  'create type too long': invalid('type'),
  'create policy a string': { status: 400, said: "'x' is not of type 'object'" },
  'create policy null': { status: 400, said: "None is not of type 'object'" },
  'create policy a list': { status: 400, said: "[1, 'a', True] is not of type 'object'" },
  'create A': { status: 201, said: policyA({ owner: 'ops' }) },
  'create B': { status: 201, said: { blob: 'B', id: 'pB', links: { self: '<base>/v3/policies/pB' }, type: '~-text' } },
  'get A': { status: 200, said: policyA({ owner: 'ops' }) },
  'get unknown': notFound('policy', '~-nope'),
  'list by type': { status: 200, said: { ids: ['pB'], links: { next: null, previous: null, self: '<base>/v3/policies?type=~-text' } } },
  'list by type prefix': { status: 200, said: ['pA', 'pB'] },
  'list by empty type': { status: 200, said: [] },
  'list by repeated type': { status: 200, said: ['pB'] },
  'list by two types': { status: 200, said: [] },
  'list by two type prefixes': { status: 200, said: ['pB'] },
  'list by type and prefix': { status: 200, said: [] },
  'update nothing': { status: 400, said: '{} does not have enough properties' },
  'update without policy': { status: 400, said: '{} does not have enough properties' },
  'update type null': invalid('type'),
  'update policy a string': { status: 400, said: `"it's" is not of type 'object'` },
  'update id': { status: 400, said: 'Cannot change policy ID' },
  'update id of unknown': { status: 400, said: 'Cannot change policy ID' },
  'update unknown': notFound('policy', '~-nope'),
  'update same id': { status: 200, said: { ...policyA({ owner: null, level: 2 }), blob: 'A' } },
  'delete unknown': notFound('policy', '~-nope'),
  'no association: check': noAssociation,
  'no association: head': { status: 404, said: null },
  'no association: delete': done,
  'no association: effective': { status: 404, said: 'No policy is associated with endpoint eMid.' },
  'no association: endpoints': { status: 200, said: { ids: [], links: { next: null, previous: null, self: '<base>/v3/policies/pA/OS-ENDPOINT-POLICY/endpoints' } } },
  ...Object.fromEntries(['PUT', 'GET', 'DELETE'].flatMap((method) => [
    [`${method} unknown policy`, notFound('policy', '~-nope')],
    [`${method} unknown endpoint`, notFound('endpoint', '~-nope')],
    [`${method} unknown service`, notFound('service', '~-nope')],
    [`${method} unknown region`, notFound('region', '~-nope')],
  ])),
  'effective of unknown endpoint': notFound('endpoint', '~-nope'),
  'endpoints of unknown policy': notFound('policy', '~-nope'),
  'service → A': done,
  'service → A: check': done,
  'service → A: head': done,
  'service → A: endpoints': {
    status: 200,
    said: {
      ids: ['eMid', 'eNone', 'eTop'],
      eMid: { enabled: true, id: 'eMid', interface: 'public', links: { self: '<base>/v3/endpoints/eMid' }, region_id: '~-mid', service_id: 'S', tier: 'x', url: 'http://eMid.test/' },
    },
  },
  // Keystone links the effective policy under /v3/endpoints.
  'service → A: effective of eMid': { status: 200, said: { blob: 'A', id: 'pA', level: 2, links: { self: '<base>/v3/endpoints/pA' }, owner: null, type: '~-json' } },
  'service → A: head effective': { status: 200, said: null },
  'top → B': done,
  'top → B: effective of eMid': { status: 200, said: 'B' },
  'top → B: effective of eTop': { status: 200, said: 'B' },
  'top → B: effective of eNone': { status: 200, said: 'A' },
  'top → B: endpoints of B': { status: 200, said: ['eMid', 'eTop'] },
  'mid → A': done,
  'mid → A: effective of eMid': { status: 200, said: 'A' },
  'mid → A: effective of eTop': { status: 200, said: 'B' },
  'mid → A: endpoints of A': { status: 200, said: ['eMid', 'eMid', 'eNone', 'eTop'] },
  'eNone → B': done,
  'eNone → B: effective': { status: 200, said: 'B' },
  'eNone → B: check with A': noAssociation,
  'eNone → B: endpoints of B': { status: 200, said: ['eMid', 'eNone', 'eTop'] },
  'top → A (replaces B)': done,
  'top: check with B': noAssociation,
  'top: check with A': done,
  'top: delete with B': done,
  'top: still A': done,
  'top: delete with A': done,
  'top: gone': noAssociation,
  'delete region mid': done,
  'mid made again: association': done,
};

/** Where this service answers otherwise, on purpose (docs/compatibility.md). */
const DIFFERENCES: Record<string, Seen> = {
  // Deleting a region removes its associations; Keystone 22 leaves them, and a region made again
  // with the same id inherits them.
  'mid made again: association': noAssociation,
};

t.test('this service: policies and OS-ENDPOINT-POLICY', async (t) => {
  const testApp = await startTestApp(t);
  await testApp.app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = testApp.app.server.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  t.same(await scenario(base, ADMIN_PASSWORD, PUBLIC_URL), { ...KEYSTONE, ...DIFFERENCES });
});

const skip = (await peerUp()) ? false : `no Keystone peer at ${PEER_URL} (start ../shared/peers/keystone/start.sh)`;

t.test('Keystone 22: policies and OS-ENDPOINT-POLICY', { skip }, async (t) => {
  t.same(await scenario(PEER_URL, PEER_PASSWORD), KEYSTONE);
});
