import t from 'tap';
import { ADMIN_PASSWORD, startTestApp } from '../helpers/app.ts';
import { call, passwordAuth } from '../helpers/keystone-client.ts';
import { PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';

// Domain-specific roles over HTTP, against this service and against the real Keystone 22
// (../shared/peers/keystone/start.sh; that half is skipped without a peer): every role kind
// (global, of domain A, of domain B) granted on every target (projects and domains of A and B, the
// system) to users and groups of both domains; implications between the kinds; role lists with and
// without domain_id; effective assignments and a token. Ids are replaced by labels so the two
// answers compare as they are.

type Observed = Record<string, unknown>;

/** JSON with keys in order, so entries compare whatever order each service writes them in. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, inner) =>
    inner && typeof inner === 'object' && !Array.isArray(inner) ? Object.fromEntries(Object.entries(inner).sort(([a], [b]) => a.localeCompare(b))) : inner,
  );

async function scenario(base: string, adminPassword: string): Promise<Observed> {
  const prefix = `domain-roles-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const login = await call(`${base}/v3/auth/tokens`, {
    method: 'POST',
    body: passwordAuth({ name: 'admin', domainId: 'default' }, adminPassword, { project: { name: 'admin', domain: { id: 'default' } } }),
  });
  if (login.status !== 201) throw new Error(`admin login: ${login.status}`);
  const api = (method: string, path: string, body?: unknown) => call(`${base}${path}`, { method, token: login.token, ...(body === undefined ? {} : { body }) });
  const labels = new Map<string, string>();
  const created: string[] = [];
  const make = async (kind: string, label: string, fields: Record<string, unknown>) => {
    const answer = await api('POST', `/v3/${kind}s`, { [kind]: { name: `${prefix}-${label}`, ...fields } });
    if (answer.status !== 201) throw new Error(`create ${kind}: ${answer.status} ${JSON.stringify(answer.body)}`);
    const id = answer.body[kind].id as string;
    labels.set(id, label);
    created.push(`/v3/${kind}s/${id}`);
    return id;
  };
  // Ids and names become labels; links and the service's address go.
  const plain = (value: unknown): unknown => {
    let text = JSON.stringify(value ?? null);
    for (const [id, label] of labels) text = text.split(id).join(label);
    return JSON.parse(text.split(`${prefix}-`).join(''), (key, inner) => (key === 'links' ? undefined : inner));
  };
  const answer = async (method: string, path: string) => {
    const reply = await api(method, path);
    return [reply.status, reply.body?.error?.message === undefined ? null : plain(reply.body.error.message)];
  };

  const observed: Observed = {};
  try {
    const dA = await make('domain', 'dA', {});
    const dB = await make('domain', 'dB', {});
    const pA = await make('project', 'pA', { domain_id: dA });
    const pB = await make('project', 'pB', { domain_id: dB });
    const uA = await make('user', 'uA', { domain_id: dA, password: 'Pw-1-long' });
    const uB = await make('user', 'uB', { domain_id: dB });
    const gA = await make('group', 'gA', { domain_id: dA });
    const gB = await make('group', 'gB', { domain_id: dB });
    const rG = await make('role', 'rG', {});
    const rG2 = await make('role', 'rG2', {});
    const rA = await make('role', 'rA', { domain_id: dA });
    const rA2 = await make('role', 'rA2', { domain_id: dA });
    const rB = await make('role', 'rB', { domain_id: dB });

    const targets = { pA: `projects/${pA}`, pB: `projects/${pB}`, dA: `domains/${dA}`, dB: `domains/${dB}`, system: 'system' };
    const actors = { uA: `users/${uA}`, uB: `users/${uB}`, gA: `groups/${gA}`, gB: `groups/${gB}` };
    for (const [roleLabel, role] of Object.entries({ rG, rA, rB })) {
      for (const [targetLabel, target] of Object.entries(targets)) {
        for (const [actorLabel, actor] of Object.entries(actors)) {
          const path = `/v3/${target}/${actor}/roles/${role}`;
          const grant = await answer('PUT', path);
          observed[`grant ${roleLabel} on ${targetLabel} to ${actorLabel}`] = { grant, check: (await answer('HEAD', path))[0] };
          if (grant[0] !== 204) observed[`remove refused ${roleLabel} on ${targetLabel} to ${actorLabel}`] = (await answer('DELETE', path))[0];
          if (targetLabel.startsWith('d')) {
            observed[`inherited ${roleLabel} on ${targetLabel} to ${actorLabel}`] = await answer('PUT', `/v3/OS-INHERIT/${target}/${actor}/roles/${role}/inherited_to_projects`);
          }
        }
      }
    }

    for (const [prior, implied] of [[rG, rG2], [rG, rA], [rA, rG], [rA, rA2], [rA, rB]] as const) {
      observed[`${labels.get(prior)} implies ${labels.get(implied)}`] = await answer('PUT', `/v3/roles/${prior}/implies/${implied}`);
    }
    observed['rA implies (list)'] = ((await api('GET', `/v3/roles/${rA}/implies`)).body.role_inference.implies as { id: string }[])
      .map((role) => labels.get(role.id)).sort();

    const ours = (roles: { name: string }[]) => roles.map((role) => role.name).filter((name) => name.startsWith(prefix)).map((name) => plain(name)).sort();
    for (const query of ['', `?domain_id=${dA}`, `?domain_id=${dB}`, '?domain_id=', '?domain_id=no-such-domain', `?name=${prefix}-rA`, `?name=${prefix}-rA&domain_id=${dA}`]) {
      const list = await api('GET', `/v3/roles${query}`);
      observed[`roles${plain(query)}`] = [list.status, ours(list.body.roles)];
    }

    // Effective assignments (entries as Keystone has them: no system entries, inherited ones keep
    // their mark) and a token: domain-specific roles are left out, what they imply is not.
    const effective = async (query: string) => {
      const list = await api('GET', `/v3/role_assignments?effective&${query}`);
      return [list.status, [...new Set((list.body.role_assignments as { role: { id: string } }[]).map((entry) => labels.get(entry.role.id) ?? 'other'))].sort()];
    };
    observed['effective of uA on pA'] = await effective(`user.id=${uA}&scope.project.id=${pA}`);
    observed['effective of rA'] = await effective(`role.id=${rA}`);
    const entries = async (query: string) => {
      const list = await api('GET', `/v3/role_assignments?effective&${query}`);
      return [list.status, (plain(list.body.role_assignments) as unknown[]).map(canonical).sort()];
    };
    observed['effective entries of uA'] = await entries(`user.id=${uA}`);
    observed['effective entries on pA'] = await entries(`scope.project.id=${pA}`);
    await api('DELETE', `/v3/projects/${pA}/users/${uA}/roles/${rG}`);
    const token = await call(`${base}/v3/auth/tokens`, { method: 'POST', body: passwordAuth({ id: uA }, 'Pw-1-long', { project: { id: pA } }) });
    observed['token of uA on pA'] = [token.status, plain((token.body?.token?.roles as { name: string }[] | undefined)?.map((role) => role.name).sort())];
  } finally {
    for (const path of created.reverse()) {
      if (path.startsWith('/v3/domains/')) await api('PATCH', path, { domain: { enabled: false } });
      await api('DELETE', path);
    }
  }
  return observed;
}

const skip = (await peerUp()) ? false : `no Keystone peer at ${PEER_URL} (start ../shared/peers/keystone/start.sh)`;

t.test('domain-specific roles: this service answers as Keystone 22', async (t) => {
  const testApp = await startTestApp(t);
  await testApp.app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = testApp.app.server.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const ours = await scenario(base, ADMIN_PASSWORD);
  // What Keystone 22 answered when this was written, so the comparison holds without the peer too.
  t.same(ours['grant rA on dB to uB'], { grant: [204, null], check: 204 }, 'a domain-specific role on another domain');
  t.same(ours['grant rA on pB to uA'], { grant: [403, 'Project pB must be in the same domain as the role rA being assigned.'], check: 404 });
  t.same(ours['grant rB on system to gA'], { grant: [400, 'Role rB is a domain-specific role. Unable to use a domain-specific role in a system assignment.'], check: 404 });
  t.same(ours['rG implies rA'], [403, 'rA cannot be an implied roles.']);
  t.same(ours['rA implies rB'], [201, null]);
  t.same(ours['rA implies (list)'], ['rA2', 'rB', 'rG']);
  t.same(ours['roles'], [200, ['rG', 'rG2']]);
  t.same(ours['effective of uA on pA'], [200, ['rG', 'rG2']]);
  t.same(ours['token of uA on pA'], [201, ['rG', 'rG2']]);
  if (skip) return;
  const keystone = await scenario(PEER_URL, PEER_PASSWORD);
  for (const key of Object.keys(keystone)) t.same(ours[key], keystone[key], key);
  t.same(Object.keys(ours).sort(), Object.keys(keystone).sort(), 'the same steps');
});
