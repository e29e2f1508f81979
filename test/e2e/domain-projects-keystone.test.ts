import t from 'tap';
import { ADMIN_PASSWORD, startTestApp } from '../helpers/app.ts';
import { call, passwordAuth } from '../helpers/keystone-client.ts';
import { PEER_PASSWORD, PEER_URL, peerUp } from '../helpers/keystone-peer.ts';

// Projects acting as domains (issue 20 item 6), over HTTP, against this service and against the real
// Keystone 22 (../shared/peers/keystone/start.sh; that half is skipped without a peer): the same
// requests, the same statuses, the same messages and the same project fields.

/** What one request answered, with this run's names and ids replaced. */
interface Seen {
  status: number;
  /** The error message (schema failures: only the field, their wording differs), the entity's fields, or a list's names. */
  said: unknown;
}

async function scenario(base: string, adminPassword: string): Promise<Record<string, Seen>> {
  const prefix = `isdom-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const login = await call(`${base}/v3/auth/tokens`, {
    method: 'POST',
    body: passwordAuth({ name: 'admin', domainId: 'default' }, adminPassword, { project: { name: 'admin', domain: { id: 'default' } } }),
  });
  if (login.status !== 201) throw new Error(`admin login: ${login.status}`);
  const api = (method: string, path: string, body?: unknown) => call(`${base}${path}`, { method, token: login.token, ...(body === undefined ? {} : { body }) });
  const names = new Map<string, string>();
  const named = (text: string) => [...names].reduce((result, [id, name]) => result.replaceAll(id, name), text.replaceAll(prefix, '~'));
  const seen: Record<string, Seen> = {};
  const ask = async (step: string, method: string, path: string, body?: unknown) => {
    const answer = await api(method, path, body);
    const error = answer.body?.error as { message: string } | undefined;
    const entity = answer.body?.project ?? answer.body?.domain;
    const list = (answer.body?.projects ?? answer.body?.domains) as { name: string }[] | undefined;
    let said: unknown = null;
    if (error) said = error.message.startsWith('Invalid input for field') ? error.message.split(':')[0] : named(error.message);
    else if (entity) {
      said = JSON.parse(named(JSON.stringify({
        name: entity.name,
        is_domain: entity.is_domain,
        domain_id: entity.domain_id,
        parent_id: entity.parent_id,
        enabled: entity.enabled,
        keys: Object.keys(entity).sort().join(','),
      })));
    } else if (list) said = list.filter((item) => item.name.startsWith(prefix)).map((item) => item.name.replace(prefix, '~')).sort();
    seen[step] = { status: answer.status, said };
    return answer;
  };
  const r = (name: string) => `${prefix}-${name}`;
  const cleanup: string[] = [];
  try {
    const domain = await ask('create is_domain', 'POST', '/v3/projects', { project: { name: r('dom'), is_domain: true } });
    const X = domain.body.project.id as string;
    names.set(X, 'X');
    cleanup.push(X);
    await ask('get as domain', 'GET', `/v3/domains/${X}`);
    await ask('get as project', 'GET', `/v3/projects/${X}`);
    await ask('is_domain with parent', 'POST', '/v3/projects', { project: { name: r('dom2'), is_domain: true, parent_id: X } });
    await ask('is_domain with domain_id', 'POST', '/v3/projects', { project: { name: r('dom3'), is_domain: true, domain_id: 'default' } });
    await ask('is_domain same name as domain', 'POST', '/v3/projects', { project: { name: r('dom'), is_domain: true } });
    await ask('domain same name as is_domain', 'POST', '/v3/domains', { domain: { name: r('dom') } });
    await ask('is_domain string', 'POST', '/v3/projects', { project: { name: r('dom4'), is_domain: 'true' } });
    await ask('is_domain null', 'POST', '/v3/projects', { project: { name: r('dom5'), is_domain: null } });
    await ask('project under (parent_id)', 'POST', '/v3/projects', { project: { name: r('sub'), parent_id: X } });
    await ask('project under (domain_id)', 'POST', '/v3/projects', { project: { name: r('sub2'), domain_id: X } });
    await ask('project parent and other domain', 'POST', '/v3/projects', { project: { name: r('sub3'), parent_id: X, domain_id: 'default' } });
    for (const value of ['true', 'false', '1', '0', 'garbage', '']) await ask(`list is_domain=${value}`, 'GET', `/v3/projects?is_domain=${value}`);
    await ask('list domain_id=X', 'GET', `/v3/projects?domain_id=${X}`);
    await ask('list parent_id=X', 'GET', `/v3/projects?parent_id=${X}`);
    await ask('list domains', 'GET', '/v3/domains');
    await ask('patch is_domain false', 'PATCH', `/v3/projects/${X}`, { project: { is_domain: false } });
    await ask('patch parent_id', 'PATCH', `/v3/projects/${X}`, { project: { parent_id: 'default' } });
    await ask('patch description', 'PATCH', `/v3/projects/${X}`, { project: { description: 'd' } });
    await ask('delete enabled domain project', 'DELETE', `/v3/projects/${X}`);
    await ask('disable with enabled subtree', 'PATCH', `/v3/projects/${X}`, { project: { enabled: false } });
    await ask('create under disabled', 'POST', '/v3/projects', { project: { name: r('sub4'), parent_id: X } });
    await ask('enable again', 'PATCH', `/v3/projects/${X}`, { project: { enabled: true } });
    await ask('disable via domains', 'PATCH', `/v3/domains/${X}`, { domain: { enabled: false } });
    await ask('delete with subtree', 'DELETE', `/v3/projects/${X}`);
    await ask('projects gone with it', 'GET', `/v3/projects?domain_id=${X}`);
    await ask('get deleted', 'GET', `/v3/domains/${X}`);

    const top = await ask('regular top', 'POST', '/v3/projects', { project: { name: r('top') } });
    names.set(top.body.project.id, 'TOP');
    await ask('regular child', 'POST', '/v3/projects', { project: { name: r('child'), parent_id: top.body.project.id } });
    await ask('regular disable with enabled subtree', 'PATCH', `/v3/projects/${top.body.project.id}`, { project: { enabled: false } });
    await ask('regular delete with subtree', 'DELETE', `/v3/projects/${top.body.project.id}`);
  } finally {
    // Leaves first: every project this run made, then the domains.
    const projects = ((await api('GET', '/v3/projects')).body.projects as { id: string; name: string; parent_id: string | null }[]).filter((project) => project.name.startsWith(prefix));
    const leaves = projects.filter((project) => !projects.some((other) => other.parent_id === project.id));
    for (const project of [...leaves, ...projects.filter((project) => !leaves.includes(project))]) {
      await api('PATCH', `/v3/projects/${project.id}`, { project: { enabled: false } });
      await api('DELETE', `/v3/projects/${project.id}`);
    }
    const domains = ((await api('GET', '/v3/domains')).body.domains as { id: string; name: string }[]).filter((domain) => domain.name.startsWith(prefix));
    for (const domain of domains) {
      await api('PATCH', `/v3/domains/${domain.id}`, { domain: { enabled: false } });
      await api('DELETE', `/v3/domains/${domain.id}`);
    }
  }
  return seen;
}

const PROJECT_KEYS = 'description,domain_id,enabled,id,is_domain,links,name,options,parent_id,tags';
const domainProject = (enabled: boolean, keys = PROJECT_KEYS) => ({ status: 200, said: { name: '~-dom', is_domain: true, domain_id: null, parent_id: null, enabled, keys } });
// Keystone's PATCH answer (only it) also carries the extra attributes as `extra`.
const PATCHED_KEYS = 'description,domain_id,enabled,extra,id,is_domain,links,name,options,parent_id,tags';
const parentActingAsDomain = {
  status: 400,
  said: "Cannot create project, the parent (X) is acting as a domain, but this project's domain id (default) does not match the parent's id.",
};
const onlyRoots = { status: 400, said: 'only root projects are allowed to act as domains.' };
const nameTaken = {
  status: 409,
  said: 'Conflict occurred attempting to store project - it is not permitted to have two projects acting as domains with the same name: ~-dom.',
};

/** What Keystone 22 answered (asked on 2026-11-25), and what this service must answer too. */
const KEYSTONE: Record<string, Seen> = {
  'create is_domain': { ...domainProject(true), status: 201 },
  'get as domain': { status: 200, said: { name: '~-dom', enabled: true, keys: 'description,enabled,id,links,name,options,tags' } },
  'get as project': domainProject(true),
  'is_domain with parent': onlyRoots,
  'is_domain with domain_id': onlyRoots,
  'is_domain same name as domain': nameTaken,
  'domain same name as is_domain': nameTaken,
  'is_domain string': { status: 400, said: "Invalid input for field 'is_domain'" },
  'is_domain null': { status: 400, said: "Invalid input for field 'is_domain'" },
  // Keystone takes the domain from the token (default) when none is given: it does not match.
  'project under (parent_id)': parentActingAsDomain,
  'project under (domain_id)': { status: 201, said: { name: '~-sub2', is_domain: false, domain_id: 'X', parent_id: 'X', enabled: true, keys: PROJECT_KEYS } },
  'project parent and other domain': parentActingAsDomain,
  // Only 'false' and '0' (any case) mean false; any other value, empty included, means true.
  'list is_domain=true': { status: 200, said: ['~-dom'] },
  'list is_domain=false': { status: 200, said: ['~-sub2'] },
  'list is_domain=1': { status: 200, said: ['~-dom'] },
  'list is_domain=0': { status: 200, said: ['~-sub2'] },
  'list is_domain=garbage': { status: 200, said: ['~-dom'] },
  'list is_domain=': { status: 200, said: ['~-dom'] },
  'list domain_id=X': { status: 200, said: ['~-sub2'] },
  'list parent_id=X': { status: 200, said: ['~-sub2'] },
  'list domains': { status: 200, said: ['~-dom'] },
  'patch is_domain false': { status: 400, said: 'Update of `is_domain` is not allowed.' },
  'patch parent_id': { status: 403, said: 'Update of `parent_id` is not allowed.' },
  'patch description': domainProject(true, PATCHED_KEYS),
  'delete enabled domain project': { status: 403, said: 'Cannot delete a domain that is enabled, please disable it first.' },
  // A project acting as a domain is disabled with enabled projects in it, as a domain is.
  'disable with enabled subtree': domainProject(false, PATCHED_KEYS),
  'create under disabled': parentActingAsDomain,
  'enable again': domainProject(true, PATCHED_KEYS),
  'disable via domains': { status: 200, said: { name: '~-dom', enabled: false, keys: 'description,enabled,id,links,name,options,tags' } },
  'delete with subtree': { status: 204, said: null },
  'projects gone with it': { status: 200, said: [] },
  'get deleted': { status: 404, said: 'Could not find domain: X.' },
  'regular top': { status: 201, said: { name: '~-top', is_domain: false, domain_id: 'default', parent_id: 'default', enabled: true, keys: PROJECT_KEYS } },
  'regular child': { status: 201, said: { name: '~-child', is_domain: false, domain_id: 'default', parent_id: 'TOP', enabled: true, keys: PROJECT_KEYS } },
  'regular disable with enabled subtree': { status: 403, said: 'Cannot disable project TOP since its subtree contains enabled projects.' },
  'regular delete with subtree': {
    status: 403,
    said: 'Cannot delete the project TOP since it is not a leaf in the hierarchy. Use the cascade option if you want to delete a whole subtree.',
  },
};

t.test('this service: projects acting as domains', async (t) => {
  const testApp = await startTestApp(t);
  await testApp.app.server.listen({ port: 0, host: '127.0.0.1' });
  const address = testApp.app.server.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  t.same(await scenario(base, ADMIN_PASSWORD), KEYSTONE);
});

const skip = (await peerUp()) ? false : `no Keystone peer at ${PEER_URL} (start ../shared/peers/keystone/start.sh)`;

t.test('Keystone 22: projects acting as domains', { skip }, async (t) => {
  t.same(await scenario(PEER_URL, PEER_PASSWORD), KEYSTONE);
});
