import t from 'tap';
import { ProjectEntity } from '../../src/store/entities.ts';
import { PUBLIC_URL, startTestApp } from '../helpers/app.ts';

t.test('projects', async (t) => {
  const { call, app } = await startTestApp(t);
  const domain = (await call('POST', '/v3/domains', { domain: { name: 'pd' } })).json().domain;

  const created = await call('POST', '/v3/projects', { project: { name: 'p1', domain_id: domain.id, tags: ['a', 'b'] } });
  t.equal(created.statusCode, 201);
  const p1 = created.json().project;
  t.match(p1, { name: 'p1', domain_id: domain.id, parent_id: domain.id, is_domain: false, enabled: true, description: '', tags: ['a', 'b'] });
  t.equal(p1.links.self, `${PUBLIC_URL}/v3/projects/${p1.id}`);

  const inDefault = await call('POST', '/v3/projects', { project: { name: 'p1' } });
  t.equal(inDefault.statusCode, 201, 'same name in another domain is fine');
  t.equal(inDefault.json().project.domain_id, 'default');

  const duplicate = await call('POST', '/v3/projects', { project: { name: 'p1', domain_id: domain.id } });
  t.equal(duplicate.statusCode, 409);
  t.match(duplicate.json().error.message, /it is not permitted to have two projects with either the same name or same id in the same domain: name is p1/);

  const unknownDomain = await call('POST', '/v3/projects', { project: { name: 'px', domain_id: 'nope' } });
  t.equal(unknownDomain.statusCode, 400);
  t.equal(unknownDomain.json().error.message, 'Could not find domain: nope.');

  const child = await call('POST', '/v3/projects', { project: { name: 'child', domain_id: domain.id, parent_id: p1.id } });
  t.equal(child.statusCode, 201);
  t.equal(child.json().project.parent_id, p1.id);

  const list = await call('GET', `/v3/projects?domain_id=${domain.id}`);
  t.same(list.json().projects.map((p: { name: string }) => p.name), ['child', 'p1']);
  t.equal(list.json().links.self, `${PUBLIC_URL}/v3/projects?domain_id=${domain.id}`);
  const tagged = await call('GET', '/v3/projects?tags=a,b');
  t.same(tagged.json().projects.map((p: { id: string }) => p.id), [p1.id]);
  const notTagged = await call('GET', `/v3/projects?domain_id=${domain.id}&not-tags-any=a`);
  t.same(notTagged.json().projects.map((p: { name: string }) => p.name), ['child']);
  const children = await call('GET', `/v3/projects?parent_id=${p1.id}`);
  t.same(children.json().projects.map((p: { name: string }) => p.name), ['child']);
  const domains = await call('GET', '/v3/projects?is_domain=true');
  t.ok(domains.json().projects.some((p: { id: string; is_domain: boolean; domain_id: null }) => p.id === domain.id && p.is_domain && p.domain_id === null));

  t.equal((await call('GET', '/v3/projects/nope')).json().error.message, 'Could not find project: nope.');

  const parentChange = await call('PATCH', `/v3/projects/${child.json().project.id}`, { project: { parent_id: domain.id } });
  t.equal(parentChange.statusCode, 403);
  t.equal(parentChange.json().error.message, 'Update of `parent_id` is not allowed.');
  const domainChange = await call('PATCH', `/v3/projects/${p1.id}`, { project: { domain_id: 'default' } });
  t.equal(domainChange.statusCode, 400);
  t.equal(domainChange.json().error.message, 'Cannot change Domain ID');
  const idChange = await call('PATCH', `/v3/projects/${p1.id}`, { project: { id: 'other' } });
  t.equal(idChange.statusCode, 400);

  const disableParent = await call('PATCH', `/v3/projects/${p1.id}`, { project: { enabled: false } });
  t.equal(disableParent.statusCode, 403, 'subtree still enabled');
  const nonLeaf = await call('DELETE', `/v3/projects/${p1.id}`);
  t.equal(nonLeaf.statusCode, 403);
  t.match(nonLeaf.json().error.message, /not a leaf in the hierarchy/);

  const renamed = await call('PATCH', `/v3/projects/${p1.id}`, { project: { name: 'p1-renamed', description: 'd', owner: 'team-a' } });
  t.equal(renamed.statusCode, 200);
  t.match(renamed.json().project, { name: 'p1-renamed', description: 'd', owner: 'team-a' });

  t.equal((await call('DELETE', `/v3/projects/${child.json().project.id}`)).statusCode, 204);
  t.equal((await call('DELETE', `/v3/projects/${p1.id}`)).statusCode, 204);
  t.equal(await app.store.reader().count(ProjectEntity, { id: p1.id }), 0);
});

t.test('project hierarchy depth is limited', async (t) => {
  const { call } = await startTestApp(t);
  let parent = 'default';
  for (let depth = 1; depth <= 5; depth++) {
    const response = await call('POST', '/v3/projects', { project: { name: `level${depth}`, parent_id: parent === 'default' ? undefined : parent } });
    t.equal(response.statusCode, 201, `depth ${depth}`);
    parent = response.json().project.id;
  }
  const tooDeep = await call('POST', '/v3/projects', { project: { name: 'level6', parent_id: parent } });
  t.equal(tooDeep.statusCode, 403);
  t.equal(tooDeep.json().error.message, `Max hierarchy depth reached for ${parent} branch.`);
});

t.test('project tags', async (t) => {
  const { call } = await startTestApp(t);
  const project = (await call('POST', '/v3/projects', { project: { name: 'tagged' } })).json().project;
  const base = `/v3/projects/${project.id}/tags`;
  t.same((await call('GET', base)).json().tags, []);
  t.equal((await call('PUT', `${base}/alpha`)).statusCode, 201);
  t.equal((await call('GET', `${base}/alpha`)).statusCode, 204);
  t.equal((await call('GET', `${base}/beta`)).statusCode, 404);
  t.equal((await call('GET', `${base}/beta`)).json().error.message, 'Could not find project tag: beta.');
  const replaced = await call('PUT', base, { tags: ['x', 'y'] });
  t.equal(replaced.statusCode, 200);
  t.same(replaced.json().tags, ['x', 'y']);
  t.equal((await call('PUT', base, { tags: ['bad/tag'] })).statusCode, 400);
  t.equal((await call('DELETE', `${base}/x`)).statusCode, 204);
  t.equal((await call('DELETE', `${base}/x`)).statusCode, 404);
  t.equal((await call('DELETE', base)).statusCode, 204);
  t.same((await call('GET', `/v3/projects/${project.id}`)).json().project.tags, []);
});
