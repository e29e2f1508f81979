// The protection matrix of the identity API: every route family × persona → allowed or denied by
// policy, as Keystone 22's default policy decides it. One table, run against this service
// (test/http/protection-matrix.test.ts) and against a real Keystone when one is up
// (test/e2e/protection-matrix-keystone.test.ts), so the two are compared cell by cell.

export const PERSONAS = [
  'system_admin',
  'system_reader',
  'domain_admin',
  'domain_reader',
  'project_admin',
  'project_member',
  'project_reader',
  'other_project_member',
  'no_token',
] as const;
export type Persona = (typeof PERSONAS)[number];

// Keystone 22 (enforce_scope=false): any token with `admin` is a cloud administrator.
const ADMINS: Persona[] = ['system_admin', 'domain_admin', 'project_admin'];
const SYSTEM_READERS: Persona[] = ['system_admin', 'system_reader'];
const DOMAIN_READERS: Persona[] = ['domain_admin', 'domain_reader'];
const PROJECT_TOKENS: Persona[] = ['project_admin', 'project_member', 'project_reader'];
const EVERYONE: Persona[] = PERSONAS.filter((persona) => persona !== 'no_token');

export interface MatrixRow {
  method: 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /**
   * Placeholders: :domain (D), :project (P, in D), :user and :group (in D), :other_user (in
   * Default), :role (member), :self (the persona's own user), :fresh_* (created for the call),
   * :unique (a new id). Literal segments fill route parameters with ids that exist nowhere.
   */
  path: string;
  /** Personas the policy lets through; the others (with a token) get 403, no token 401. */
  allowed: Persona[];
  body?: (unique: string) => unknown;
  /** X-Subject-Token: the persona's own token, another user's, or a new one of another user (to revoke). */
  subject?: 'own' | 'other' | 'fresh_other';
  note?: string;
}

const union = (...groups: Persona[][]): Persona[] => [...new Set(groups.flat())];

export const PROTECTION_MATRIX: MatrixRow[] = [
  // tokens
  { method: 'GET', path: '/v3/auth/tokens', subject: 'own', allowed: EVERYONE },
  { method: 'GET', path: '/v3/auth/tokens', subject: 'other', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/auth/catalog', allowed: EVERYONE },
  { method: 'GET', path: '/v3/auth/projects', allowed: EVERYONE },
  { method: 'GET', path: '/v3/auth/domains', allowed: EVERYONE },
  { method: 'GET', path: '/v3/auth/system', allowed: EVERYONE },
  { method: 'DELETE', path: '/v3/auth/tokens', subject: 'fresh_other', allowed: ADMINS, note: 'revoking one\'s own token is in test/http/auth.test.ts' },
  { method: 'GET', path: '/v3/OS-REVOKE/events', allowed: ADMINS },
  // domains
  { method: 'GET', path: '/v3/domains', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/domains/:domain', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS, PROJECT_TOKENS) },
  { method: 'POST', path: '/v3/domains', allowed: ADMINS, body: (unique) => ({ domain: { name: `m-${unique}` } }) },
  { method: 'PATCH', path: '/v3/domains/:fresh_domain', allowed: ADMINS, body: () => ({ domain: { description: 'x' } }) },
  { method: 'DELETE', path: '/v3/domains/:fresh_domain', allowed: ADMINS },
  { method: 'PATCH', path: '/v3/domains/none', allowed: EVERYONE, body: () => ({ domain: { description: 'x' } }), note: '404 before policy, as Keystone (its enforcer reads the member first)' },
  { method: 'PATCH', path: '/v3/domains/:fresh_domain', allowed: ADMINS, body: () => ({ domain: {} }), note: 'decided before the body is validated, as Keystone: allowed is its 400' },
  { method: 'PATCH', path: '/v3/domains/none', allowed: EVERYONE, body: () => ({ domain: {} }), note: '404 before policy and validation, as Keystone' },
  { method: 'DELETE', path: '/v3/domains/none', allowed: EVERYONE, note: '404 before policy, as Keystone (its enforcer reads the member first)' },
  // domain configuration: Keystone enforces before it reads anything (callers let through get a 404
  // where there is no configuration, or the answer); any token reads the default domain's password rules
  { method: 'GET', path: '/v3/domains/config/default', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/domains/config/ldap/default', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/domains/config/ldap/url/default', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PUT', path: '/v3/domains/:fresh_domain/config', allowed: ADMINS, body: () => ({ config: { identity: { driver: 'sql' } } }) },
  { method: 'GET', path: '/v3/domains/:domain/config', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PATCH', path: '/v3/domains/:fresh_domain/config', allowed: ADMINS, body: () => ({ config: { identity: { driver: 'sql' } } }) },
  { method: 'DELETE', path: '/v3/domains/:fresh_domain/config', allowed: ADMINS },
  { method: 'GET', path: '/v3/domains/:domain/config/ldap', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PATCH', path: '/v3/domains/:fresh_domain/config/identity', allowed: ADMINS, body: () => ({ config: { identity: { driver: 'sql' } } }) },
  { method: 'DELETE', path: '/v3/domains/:fresh_domain/config/identity', allowed: ADMINS },
  { method: 'GET', path: '/v3/domains/:domain/config/ldap/url', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PATCH', path: '/v3/domains/:fresh_domain/config/identity/driver', allowed: ADMINS, body: () => ({ config: { driver: 'sql' } }) },
  { method: 'DELETE', path: '/v3/domains/:fresh_domain/config/identity/driver', allowed: ADMINS },
  { method: 'GET', path: '/v3/domains/default/config/security_compliance', allowed: EVERYONE },
  { method: 'GET', path: '/v3/domains/default/config/security_compliance/password_regex', allowed: EVERYONE },
  // projects
  { method: 'GET', path: '/v3/projects', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'GET', path: '/v3/projects/:project', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS, PROJECT_TOKENS) },
  { method: 'GET', path: '/v3/projects/:project/tags', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS, PROJECT_TOKENS) },
  { method: 'PUT', path: '/v3/projects/:project/tags/matrix', allowed: ADMINS },
  { method: 'GET', path: '/v3/projects/:project/tags/matrix', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS, PROJECT_TOKENS) },
  { method: 'DELETE', path: '/v3/projects/:fresh_project/tags/matrix', allowed: ADMINS },
  { method: 'PUT', path: '/v3/projects/:fresh_project/tags', allowed: ADMINS, body: () => ({ tags: ['matrix'] }) },
  { method: 'DELETE', path: '/v3/projects/:fresh_project/tags', allowed: ADMINS },
  { method: 'POST', path: '/v3/projects', allowed: ADMINS, body: (unique) => ({ project: { name: `m-${unique}` } }) },
  { method: 'PATCH', path: '/v3/projects/:fresh_project', allowed: ADMINS, body: () => ({ project: { description: 'x' } }) },
  { method: 'PATCH', path: '/v3/projects/:fresh_project', allowed: ADMINS, body: () => ({ project: {} }), note: 'decided before the body is validated, as Keystone: allowed is its 400' },
  { method: 'DELETE', path: '/v3/projects/:fresh_project', allowed: ADMINS },
  { method: 'GET', path: '/v3/users/:user/projects', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'GET', path: '/v3/users/:self/projects', allowed: EVERYONE },
  // users
  { method: 'GET', path: '/v3/users', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'GET', path: '/v3/users/:user', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'GET', path: '/v3/users/:other_user', allowed: union(ADMINS, SYSTEM_READERS), note: 'a domain reader reads only its domain' },
  { method: 'GET', path: '/v3/users/:self', allowed: EVERYONE },
  { method: 'POST', path: '/v3/users', allowed: ADMINS, body: (unique) => ({ user: { name: `m-${unique}` } }) },
  { method: 'PATCH', path: '/v3/users/:fresh_user', allowed: ADMINS, body: () => ({ user: { description: 'x' } }) },
  { method: 'PATCH', path: '/v3/users/:fresh_user', allowed: ADMINS, body: () => ({ user: {} }), note: 'decided before the body is validated, as Keystone: allowed is its 400' },
  { method: 'PATCH', path: '/v3/users/:self', allowed: ADMINS, body: () => ({ user: { description: 'x' } }), note: 'users do not update themselves' },
  { method: 'DELETE', path: '/v3/users/:fresh_user', allowed: ADMINS },
  { method: 'GET', path: '/v3/users/:user/groups', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'GET', path: '/v3/users/:self/groups', allowed: EVERYONE },
  // groups
  { method: 'GET', path: '/v3/groups', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'GET', path: '/v3/groups/:group', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'GET', path: '/v3/groups/:group/users', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'HEAD', path: '/v3/groups/:group/users/:user', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'GET', path: '/v3/groups/:group/users/:user', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'PUT', path: '/v3/groups/:group/users/:user', allowed: ADMINS },
  { method: 'DELETE', path: '/v3/groups/:fresh_group/users/:user', allowed: ADMINS },
  { method: 'POST', path: '/v3/groups', allowed: ADMINS, body: (unique) => ({ group: { name: `m-${unique}` } }) },
  { method: 'PATCH', path: '/v3/groups/:fresh_group', allowed: ADMINS, body: () => ({ group: { description: 'x' } }) },
  { method: 'PATCH', path: '/v3/groups/:fresh_group', allowed: ADMINS, body: () => ({ group: {} }), note: 'decided before the body is validated, as Keystone: allowed is its 400' },
  { method: 'DELETE', path: '/v3/groups/:fresh_group', allowed: ADMINS },
  { method: 'DELETE', path: '/v3/groups/none', allowed: EVERYONE, note: '404 before policy, as Keystone (its enforcer reads the member first)' },
  // roles
  { method: 'GET', path: '/v3/roles', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/roles/:role', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/role_inferences', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'POST', path: '/v3/roles', allowed: ADMINS, body: (unique) => ({ role: { name: `m-${unique}` } }) },
  { method: 'PATCH', path: '/v3/roles/:fresh_role', allowed: ADMINS, body: () => ({ role: { description: 'x' } }) },
  { method: 'DELETE', path: '/v3/roles/:fresh_role', allowed: ADMINS },
  { method: 'PATCH', path: '/v3/roles/none', allowed: EVERYONE, body: () => ({ role: { description: 'x' } }), note: '404 before policy, as Keystone (its enforcer reads the member first)' },
  { method: 'PATCH', path: '/v3/roles/:fresh_role', allowed: ADMINS, body: () => ({ role: {} }), note: 'decided before the body is validated, as Keystone: allowed is its 400' },
  { method: 'PATCH', path: '/v3/roles/none', allowed: EVERYONE, body: () => ({ role: {} }), note: '404 before policy and validation, as Keystone' },
  { method: 'GET', path: '/v3/roles/none', allowed: EVERYONE, note: '404 before policy, as Keystone (its enforcer reads the member first)' },
  { method: 'DELETE', path: '/v3/roles/none', allowed: EVERYONE, note: '404 before policy, as Keystone (its enforcer reads the member first)' },
  { method: 'GET', path: '/v3/roles/:role/implies', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/roles/:role/implies/:role', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PUT', path: '/v3/roles/:fresh_role/implies/:role', allowed: ADMINS },
  { method: 'DELETE', path: '/v3/roles/:role/implies/:role', allowed: ADMINS },
  // role assignments
  { method: 'GET', path: '/v3/projects/:project/users/:user/roles', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'HEAD', path: '/v3/projects/:project/users/:user/roles/:role', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'PUT', path: '/v3/projects/:project/users/:user/roles/:role', allowed: ADMINS },
  { method: 'GET', path: '/v3/domains/:domain/users/:other_user/roles', allowed: union(ADMINS, SYSTEM_READERS), note: 'the actor is outside the domain' },
  { method: 'GET', path: '/v3/system/users/:user/roles', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/projects/:project/users/:user/roles/:role', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'DELETE', path: '/v3/projects/:fresh_project/users/:user/roles/:role', allowed: ADMINS },
  { method: 'GET', path: '/v3/domains/:domain/users/:user/roles', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'GET', path: '/v3/domains/:domain/users/:user/roles/:role', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'PUT', path: '/v3/domains/:domain/users/:fresh_user/roles/:role', allowed: ADMINS },
  { method: 'DELETE', path: '/v3/domains/:domain/users/:fresh_user/roles/:role', allowed: ADMINS },
  { method: 'GET', path: '/v3/system/users/:user/roles/:role', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PUT', path: '/v3/system/users/:fresh_user/roles/:role', allowed: ADMINS },
  { method: 'DELETE', path: '/v3/system/users/:fresh_user/roles/:role', allowed: ADMINS },
  { method: 'GET', path: '/v3/projects/:project/groups/:group/roles', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'GET', path: '/v3/projects/:project/groups/:group/roles/:role', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'PUT', path: '/v3/projects/:project/groups/:fresh_group/roles/:role', allowed: ADMINS },
  { method: 'DELETE', path: '/v3/projects/:project/groups/:fresh_group/roles/:role', allowed: ADMINS },
  { method: 'GET', path: '/v3/domains/:domain/groups/:group/roles', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'GET', path: '/v3/domains/:domain/groups/:group/roles/:role', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'PUT', path: '/v3/domains/:domain/groups/:fresh_group/roles/:role', allowed: ADMINS },
  { method: 'DELETE', path: '/v3/domains/:domain/groups/:fresh_group/roles/:role', allowed: ADMINS },
  { method: 'GET', path: '/v3/system/groups/:group/roles', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/system/groups/:group/roles/:role', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PUT', path: '/v3/system/groups/:fresh_group/roles/:role', allowed: ADMINS },
  { method: 'DELETE', path: '/v3/system/groups/:fresh_group/roles/:role', allowed: ADMINS },
  // inherited to the projects below (OS-INHERIT): the same grant rules
  { method: 'GET', path: '/v3/OS-INHERIT/domains/:domain/users/:user/roles/inherited_to_projects', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'GET', path: '/v3/OS-INHERIT/domains/:domain/users/:user/roles/:role/inherited_to_projects', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'PUT', path: '/v3/OS-INHERIT/domains/:domain/users/:fresh_user/roles/:role/inherited_to_projects', allowed: ADMINS },
  { method: 'DELETE', path: '/v3/OS-INHERIT/domains/:domain/users/:fresh_user/roles/:role/inherited_to_projects', allowed: ADMINS },
  { method: 'GET', path: '/v3/OS-INHERIT/projects/:project/users/:user/roles/:role/inherited_to_projects', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'PUT', path: '/v3/OS-INHERIT/projects/:fresh_project/users/:user/roles/:role/inherited_to_projects', allowed: ADMINS },
  { method: 'DELETE', path: '/v3/OS-INHERIT/projects/:fresh_project/users/:user/roles/:role/inherited_to_projects', allowed: ADMINS },
  { method: 'GET', path: '/v3/OS-INHERIT/domains/:domain/groups/:group/roles/inherited_to_projects', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'GET', path: '/v3/OS-INHERIT/domains/:domain/groups/:group/roles/:role/inherited_to_projects', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'PUT', path: '/v3/OS-INHERIT/domains/:domain/groups/:fresh_group/roles/:role/inherited_to_projects', allowed: ADMINS },
  { method: 'DELETE', path: '/v3/OS-INHERIT/domains/:domain/groups/:fresh_group/roles/:role/inherited_to_projects', allowed: ADMINS },
  { method: 'GET', path: '/v3/OS-INHERIT/projects/:project/groups/:group/roles/:role/inherited_to_projects', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'PUT', path: '/v3/OS-INHERIT/projects/:fresh_project/groups/:group/roles/:role/inherited_to_projects', allowed: ADMINS },
  { method: 'DELETE', path: '/v3/OS-INHERIT/projects/:fresh_project/groups/:group/roles/:role/inherited_to_projects', allowed: ADMINS },
  { method: 'GET', path: '/v3/role_assignments', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  // catalog
  { method: 'GET', path: '/v3/regions', allowed: EVERYONE },
  { method: 'POST', path: '/v3/regions', allowed: ADMINS, body: (unique) => ({ region: { id: `m-${unique}` } }) },
  { method: 'GET', path: '/v3/services', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'POST', path: '/v3/services', allowed: ADMINS, body: (unique) => ({ service: { type: `m-${unique}` } }) },
  { method: 'PUT', path: '/v3/regions/:unique', allowed: ADMINS, body: () => ({ region: {} }) },
  { method: 'GET', path: '/v3/regions/:fresh_region', allowed: EVERYONE },
  { method: 'PATCH', path: '/v3/regions/:fresh_region', allowed: ADMINS, body: () => ({ region: { description: 'x' } }) },
  { method: 'PATCH', path: '/v3/regions/:fresh_region', allowed: ADMINS, body: () => ({ region: [] }), note: 'decided before the body is validated, as Keystone: allowed is its 400' },
  { method: 'DELETE', path: '/v3/regions/:fresh_region', allowed: ADMINS },
  { method: 'GET', path: '/v3/services/:fresh_service', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PATCH', path: '/v3/services/:fresh_service', allowed: ADMINS, body: () => ({ service: { description: 'x' } }) },
  { method: 'PATCH', path: '/v3/services/:fresh_service', allowed: ADMINS, body: () => ({ service: {} }), note: 'decided before the body is validated, as Keystone: allowed is its 400' },
  { method: 'DELETE', path: '/v3/services/:fresh_service', allowed: ADMINS },
  { method: 'GET', path: '/v3/endpoints', allowed: union(ADMINS, SYSTEM_READERS) },
  {
    method: 'POST',
    path: '/v3/endpoints',
    allowed: ADMINS,
    body: () => ({ endpoint: { service_id: 'no-such-service', interface: 'public', url: 'http://matrix.test/' } }),
    note: 'refused by policy before the unknown service is noticed',
  },
  { method: 'GET', path: '/v3/endpoints/:fresh_endpoint', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PATCH', path: '/v3/endpoints/:fresh_endpoint', allowed: ADMINS, body: () => ({ endpoint: { url: 'http://matrix.test/x' } }) },
  { method: 'DELETE', path: '/v3/endpoints/:fresh_endpoint', allowed: ADMINS },
  { method: 'PATCH', path: '/v3/endpoints/none', allowed: EVERYONE, body: () => ({ endpoint: { url: 'http://matrix.test/x' } }), note: '404 before policy, as Keystone (its enforcer reads the member first)' },
  { method: 'PATCH', path: '/v3/endpoints/:fresh_endpoint', allowed: ADMINS, body: () => ({ endpoint: {} }), note: 'decided before the body is validated, as Keystone: allowed is its 400' },
  { method: 'PATCH', path: '/v3/endpoints/none', allowed: EVERYONE, body: () => ({ endpoint: {} }), note: '404 before policy and validation, as Keystone' },
  { method: 'GET', path: '/v3/endpoints/none', allowed: EVERYONE, note: '404 before policy, as Keystone (its enforcer reads the member first)' },
  { method: 'DELETE', path: '/v3/endpoints/none', allowed: EVERYONE, note: '404 before policy, as Keystone (its enforcer reads the member first)' },
  // policy store and OS-ENDPOINT-POLICY: Keystone enforces before it looks anything up, so ids that
  // exist nowhere (and a create body without blob) tell the policy's answer without writing anything.
  { method: 'GET', path: '/v3/policies', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'POST', path: '/v3/policies', allowed: ADMINS, body: () => ({}), note: 'allowed: 400, the body has no blob' },
  { method: 'GET', path: '/v3/policies/none', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PATCH', path: '/v3/policies/none', allowed: ADMINS, body: () => ({ policy: { blob: 'x' } }) },
  { method: 'DELETE', path: '/v3/policies/none', allowed: ADMINS },
  { method: 'GET', path: '/v3/policies/none/OS-ENDPOINT-POLICY/endpoints', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/endpoints/none/OS-ENDPOINT-POLICY/policy', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PUT', path: '/v3/policies/none/OS-ENDPOINT-POLICY/endpoints/none', allowed: ADMINS },
  { method: 'GET', path: '/v3/policies/none/OS-ENDPOINT-POLICY/endpoints/none', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'HEAD', path: '/v3/policies/none/OS-ENDPOINT-POLICY/endpoints/none', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'DELETE', path: '/v3/policies/none/OS-ENDPOINT-POLICY/endpoints/none', allowed: ADMINS },
  { method: 'PUT', path: '/v3/policies/none/OS-ENDPOINT-POLICY/services/none', allowed: ADMINS },
  { method: 'GET', path: '/v3/policies/none/OS-ENDPOINT-POLICY/services/none', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'DELETE', path: '/v3/policies/none/OS-ENDPOINT-POLICY/services/none', allowed: ADMINS },
  { method: 'PUT', path: '/v3/policies/none/OS-ENDPOINT-POLICY/services/none/regions/none', allowed: ADMINS },
  { method: 'GET', path: '/v3/policies/none/OS-ENDPOINT-POLICY/services/none/regions/none', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'DELETE', path: '/v3/policies/none/OS-ENDPOINT-POLICY/services/none/regions/none', allowed: ADMINS },
  // OS-EP-FILTER (ids that exist nowhere: an allowed call is the 404 after policy; nothing is created)
  { method: 'GET', path: '/v3/OS-EP-FILTER/endpoint_groups', allowed: union(ADMINS, SYSTEM_READERS) },
  {
    method: 'POST',
    path: '/v3/OS-EP-FILTER/endpoint_groups',
    allowed: ADMINS,
    body: (unique) => ({ endpoint_group: { name: `m-${unique}`, filters: {} } }),
    note: 'empty filters: refused (400) after policy, so nothing is created',
  },
  { method: 'GET', path: '/v3/OS-EP-FILTER/endpoint_groups/none', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PATCH', path: '/v3/OS-EP-FILTER/endpoint_groups/none', allowed: ADMINS, body: () => ({ endpoint_group: { description: 'x' } }) },
  { method: 'PATCH', path: '/v3/OS-EP-FILTER/endpoint_groups/none', allowed: ADMINS, body: () => ({ endpoint_group: {} }), note: 'decided before the body is validated, as Keystone: allowed is its 400' },
  { method: 'DELETE', path: '/v3/OS-EP-FILTER/endpoint_groups/none', allowed: ADMINS },
  { method: 'GET', path: '/v3/OS-EP-FILTER/endpoint_groups/none/endpoints', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/OS-EP-FILTER/endpoint_groups/none/projects', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PUT', path: '/v3/OS-EP-FILTER/endpoint_groups/none/projects/:project', allowed: ADMINS },
  { method: 'GET', path: '/v3/OS-EP-FILTER/endpoint_groups/none/projects/:project', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'HEAD', path: '/v3/OS-EP-FILTER/endpoint_groups/none/projects/:project', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'DELETE', path: '/v3/OS-EP-FILTER/endpoint_groups/none/projects/:project', allowed: ADMINS },
  { method: 'GET', path: '/v3/OS-EP-FILTER/projects/:project/endpoint_groups', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PUT', path: '/v3/OS-EP-FILTER/projects/:project/endpoints/none', allowed: ADMINS },
  { method: 'GET', path: '/v3/OS-EP-FILTER/projects/:project/endpoints/none', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'HEAD', path: '/v3/OS-EP-FILTER/projects/:project/endpoints/none', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'DELETE', path: '/v3/OS-EP-FILTER/projects/:project/endpoints/none', allowed: ADMINS },
  { method: 'GET', path: '/v3/OS-EP-FILTER/projects/:project/endpoints', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/OS-EP-FILTER/endpoints/none/projects', allowed: union(ADMINS, SYSTEM_READERS) },
  // unified limits: reads are open to any token (but one limit: its project's, its domain's), writes to admins
  { method: 'GET', path: '/v3/limits/model', allowed: EVERYONE },
  { method: 'GET', path: '/v3/registered_limits', allowed: EVERYONE },
  {
    method: 'POST',
    path: '/v3/registered_limits',
    allowed: ADMINS,
    body: (unique) => ({ registered_limits: [{ service_id: 'no-such-service', resource_name: `m-${unique}`, default_limit: 1 }] }),
    note: 'refused by policy before the unknown service is noticed',
  },
  { method: 'GET', path: '/v3/registered_limits/:fresh_registered_limit', allowed: EVERYONE },
  { method: 'PATCH', path: '/v3/registered_limits/:fresh_registered_limit', allowed: ADMINS, body: () => ({ registered_limit: { description: 'x' } }) },
  { method: 'DELETE', path: '/v3/registered_limits/:fresh_registered_limit', allowed: ADMINS },
  { method: 'GET', path: '/v3/limits', allowed: EVERYONE, note: 'the list is narrowed to the token\'s scope, not refused' },
  {
    method: 'POST',
    path: '/v3/limits',
    allowed: ADMINS,
    body: (unique) => ({ limits: [{ project_id: 'no-such-project', service_id: 'no-such-service', resource_name: `m-${unique}`, resource_limit: 1 }] }),
    note: 'refused by policy before the unknown service is noticed',
  },
  {
    method: 'GET',
    path: '/v3/limits/:fresh_limit',
    allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS, PROJECT_TOKENS),
    note: "the limit is P's: P's domain and P's tokens read it, another project's do not",
  },
  { method: 'PATCH', path: '/v3/limits/:fresh_limit', allowed: ADMINS, body: () => ({ limit: { resource_limit: 2 } }) },
  { method: 'DELETE', path: '/v3/limits/:fresh_limit', allowed: ADMINS },
  { method: 'PATCH', path: '/v3/limits/none', allowed: EVERYONE, body: () => ({ limit: { resource_limit: 2 } }), note: '404 before policy, as Keystone (its enforcer reads the member first)' },
  { method: 'DELETE', path: '/v3/limits/none', allowed: EVERYONE, note: '404 before policy, as Keystone (its enforcer reads the member first)' },
  // application credentials and access rules
  { method: 'GET', path: '/v3/users/:self/application_credentials', allowed: EVERYONE },
  { method: 'GET', path: '/v3/users/:user/application_credentials', allowed: union(ADMINS, SYSTEM_READERS) },
  {
    method: 'POST',
    path: '/v3/users/:user/application_credentials',
    allowed: [],
    body: (unique) => ({ application_credential: { name: `m-${unique}` } }),
    note: 'only the owner creates API keys, not even an admin for someone else',
  },
  { method: 'GET', path: '/v3/users/:user/access_rules', allowed: SYSTEM_READERS, note: 'no admin shortcut for access rules' },
  { method: 'GET', path: '/v3/users/:self/access_rules', allowed: EVERYONE },
  { method: 'GET', path: '/v3/users/:user/application_credentials/none', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/users/:self/application_credentials/none', allowed: EVERYONE },
  { method: 'DELETE', path: '/v3/users/:user/application_credentials/none', allowed: ADMINS },
  { method: 'DELETE', path: '/v3/users/:self/application_credentials/none', allowed: EVERYONE },
  { method: 'GET', path: '/v3/users/:user/access_rules/none', allowed: SYSTEM_READERS },
  { method: 'GET', path: '/v3/users/:self/access_rules/none', allowed: EVERYONE },
  { method: 'DELETE', path: '/v3/users/:user/access_rules/none', allowed: ['system_admin'], note: 'only a system admin deletes another user\'s access rules' },
  { method: 'DELETE', path: '/v3/users/:self/access_rules/none', allowed: EVERYONE },
  // credentials: anyone lists (and sees only their own); the others need an admin, or the owner of an
  // existing credential (ids that exist nowhere: an allowed call is the 404 or 400 after policy)
  { method: 'GET', path: '/v3/credentials', allowed: EVERYONE },
  { method: 'POST', path: '/v3/credentials', allowed: ADMINS, body: () => ({}), note: 'allowed: 400, the body has no blob (nothing is created)' },
  { method: 'GET', path: '/v3/credentials/none', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PATCH', path: '/v3/credentials/none', allowed: ADMINS, body: () => ({ credential: { blob: 'x' } }) },
  { method: 'DELETE', path: '/v3/credentials/none', allowed: ADMINS },
  // OS-EC2: a user's own list and create, else an admin; an unknown access key is 404 for anyone
  // (Keystone looks the credential up to build the policy target)
  { method: 'GET', path: '/v3/users/:self/credentials/OS-EC2', allowed: EVERYONE },
  { method: 'GET', path: '/v3/users/:user/credentials/OS-EC2', allowed: ADMINS },
  { method: 'POST', path: '/v3/users/:user/credentials/OS-EC2', allowed: ADMINS, body: () => ({}), note: 'allowed: 404 for project None (nothing is created)' },
  { method: 'GET', path: '/v3/users/:user/credentials/OS-EC2/none', allowed: EVERYONE, note: '404 before policy, as Keystone' },
  { method: 'DELETE', path: '/v3/users/:user/credentials/OS-EC2/none', allowed: EVERYONE, note: '404 before policy, as Keystone' },
  // EC2 and S3 signatures: a service or an admin asks (Keystone 22's patched policy)
  { method: 'POST', path: '/v3/ec2tokens', allowed: ADMINS, body: () => ({}), note: 'allowed: 400 for the empty body' },
  { method: 'POST', path: '/v3/s3tokens', allowed: ADMINS, body: () => ({}), note: 'allowed: 400 for the empty body' },
  // OS-TRUST (a trust that exists nowhere: Keystone reads it before its policy, so every token gets its 404)
  {
    method: 'POST',
    path: '/v3/OS-TRUST/trusts',
    allowed: [],
    body: () => ({ trust: { trustor_user_id: 'someone-else', trustee_user_id: 'someone', project_id: 'none', impersonation: false, roles: [{ name: 'reader' }] } }),
    note: 'only the trustor creates a trust, not even an admin for someone else',
  },
  { method: 'GET', path: '/v3/OS-TRUST/trusts', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/OS-TRUST/trusts?trustor_user_id=:user', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/OS-TRUST/trusts?trustee_user_id=:self', allowed: EVERYONE },
  { method: 'GET', path: '/v3/OS-TRUST/trusts/none', allowed: EVERYONE },
  { method: 'DELETE', path: '/v3/OS-TRUST/trusts/none', allowed: EVERYONE },
  { method: 'GET', path: '/v3/OS-TRUST/trusts/none/roles', allowed: EVERYONE },
  { method: 'GET', path: '/v3/OS-TRUST/trusts/none/roles/:role', allowed: EVERYONE },
  { method: 'HEAD', path: '/v3/OS-TRUST/trusts/none/roles/:role', allowed: EVERYONE },
  // OS-OAUTH1 (request_token and access_token are signed, not policy-checked: PUBLIC_ROUTES)
  { method: 'GET', path: '/v3/OS-OAUTH1/consumers', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/OS-OAUTH1/consumers/none', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'POST', path: '/v3/OS-OAUTH1/consumers', allowed: ADMINS, body: (unique) => ({ consumer: { description: `m-${unique}` } }) },
  { method: 'PATCH', path: '/v3/OS-OAUTH1/consumers/none', allowed: ADMINS, body: () => ({ consumer: { description: 'x' } }) },
  { method: 'PATCH', path: '/v3/OS-OAUTH1/consumers/none', allowed: ADMINS, body: () => ({ consumer: [] }), note: 'decided before the body is validated, as Keystone: allowed is its 400' },
  { method: 'DELETE', path: '/v3/OS-OAUTH1/consumers/none', allowed: ADMINS },
  { method: 'PUT', path: '/v3/OS-OAUTH1/authorize/none', allowed: ADMINS, body: () => ({ roles: [{ id: 'none' }] }) },
  { method: 'GET', path: '/v3/users/:user/OS-OAUTH1/access_tokens', allowed: ADMINS },
  { method: 'GET', path: '/v3/users/:self/OS-OAUTH1/access_tokens', allowed: ADMINS, note: 'admin_required, even for one\'s own' },
  { method: 'GET', path: '/v3/users/:user/OS-OAUTH1/access_tokens/none', allowed: ADMINS },
  { method: 'DELETE', path: '/v3/users/:user/OS-OAUTH1/access_tokens/none', allowed: ADMINS },
  { method: 'GET', path: '/v3/users/:user/OS-OAUTH1/access_tokens/none/roles', allowed: ADMINS },
  { method: 'GET', path: '/v3/users/:user/OS-OAUTH1/access_tokens/none/roles/none', allowed: ADMINS },
  // OS-FEDERATION (reads: system readers and admins; writes: admins; the scoping lists: anyone)
  { method: 'GET', path: '/v3/OS-FEDERATION/projects', allowed: EVERYONE },
  { method: 'GET', path: '/v3/OS-FEDERATION/domains', allowed: EVERYONE },
  { method: 'GET', path: '/v3/OS-FEDERATION/identity_providers', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/OS-FEDERATION/identity_providers/none', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PUT', path: '/v3/OS-FEDERATION/identity_providers/matrix-idp', allowed: ADMINS, body: () => ({ identity_provider: { domain_id: 'default' } }) },
  { method: 'PATCH', path: '/v3/OS-FEDERATION/identity_providers/none', allowed: ADMINS, body: () => ({ identity_provider: { enabled: true } }) },
  { method: 'DELETE', path: '/v3/OS-FEDERATION/identity_providers/none', allowed: ADMINS },
  { method: 'GET', path: '/v3/OS-FEDERATION/identity_providers/none/protocols', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/OS-FEDERATION/identity_providers/none/protocols/none', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PUT', path: '/v3/OS-FEDERATION/identity_providers/none/protocols/none', allowed: ADMINS, body: () => ({ protocol: { mapping_id: 'none' } }) },
  { method: 'PATCH', path: '/v3/OS-FEDERATION/identity_providers/none/protocols/none', allowed: ADMINS, body: () => ({ protocol: { mapping_id: 'none' } }) },
  { method: 'DELETE', path: '/v3/OS-FEDERATION/identity_providers/none/protocols/none', allowed: ADMINS },
  { method: 'GET', path: '/v3/OS-FEDERATION/mappings', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/OS-FEDERATION/mappings/none', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PUT', path: '/v3/OS-FEDERATION/mappings/none', allowed: ADMINS, body: () => ({ mapping: { rules: [] } }) },
  { method: 'PATCH', path: '/v3/OS-FEDERATION/mappings/none', allowed: ADMINS, body: () => ({ mapping: { rules: [] } }) },
  { method: 'DELETE', path: '/v3/OS-FEDERATION/mappings/none', allowed: ADMINS },
  { method: 'GET', path: '/v3/OS-FEDERATION/service_providers', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'GET', path: '/v3/OS-FEDERATION/service_providers/none', allowed: union(ADMINS, SYSTEM_READERS) },
  { method: 'PUT', path: '/v3/OS-FEDERATION/service_providers/matrix-sp', allowed: ADMINS, body: () => ({ service_provider: { auth_url: 'http://sp/auth', sp_url: 'http://sp/ecp' } }) },
  { method: 'PATCH', path: '/v3/OS-FEDERATION/service_providers/none', allowed: ADMINS, body: () => ({ service_provider: { enabled: true } }) },
  { method: 'DELETE', path: '/v3/OS-FEDERATION/service_providers/none', allowed: ADMINS },
];

/** Rows that only this service has (not compared with Keystone). */
export const OWN_ROWS: MatrixRow[] = [
  // Keystone 22 lists inherited grants on a domain only: these paths are 404 there.
  { method: 'GET', path: '/v3/OS-INHERIT/projects/:project/users/:user/roles/inherited_to_projects', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  { method: 'GET', path: '/v3/OS-INHERIT/projects/:project/groups/:group/roles/inherited_to_projects', allowed: union(ADMINS, SYSTEM_READERS, DOMAIN_READERS) },
  {
    method: 'POST',
    path: '/v3/gateway/policy/explain',
    allowed: ADMINS,
    body: () => ({ explain: { method: 'GET', path: '/compute/v2.1', roles: ['reader'], scope: 'project' } }),
  },
  // A request id no proxied request had: admins get 404, the others 403.
  { method: 'GET', path: '/v3/gateway/decisions/req-00000000-0000-4000-8000-000000000000', allowed: ADMINS },
  { method: 'POST', path: '/v3/gateway/policy/replay', allowed: ADMINS, body: () => ({ replay: { files: {} } }) },
];

/**
 * The routes anyone may call without a token; test/http/security.test.ts runs the public cases of
 * test/helpers/security.ts on them. Every other route of the service must have a row above.
 */
export const PUBLIC_ROUTES = [
  'GET /',
  'GET /v3',
  'GET /healthz',
  'GET /readyz',
  'GET /metrics',
  'GET /openapi.json',
  'GET /api-docs',
  'POST /v3/auth/tokens',
  'GET /v3/auth/jwks',
  'POST /v3/users/:user_id/password',
  'POST /v3/OS-OAUTH1/request_token',
  'POST /v3/OS-OAUTH1/access_token',
  // OS-FEDERATION's login: the request is verified into an assertion, not policy-checked.
  'GET /v3/OS-FEDERATION/identity_providers/:idp_id/protocols/:protocol_id/auth',
  'HEAD /v3/OS-FEDERATION/identity_providers/:idp_id/protocols/:protocol_id/auth',
  'POST /v3/OS-FEDERATION/identity_providers/:idp_id/protocols/:protocol_id/auth',
  // websso (browser single sign-on, OIDC relying party): unenforced in Keystone; the origin must be a
  // trusted dashboard, the callback's state the browser's own sealed one, the id_token verified.
  'GET /v3/auth/OS-FEDERATION/websso/:protocol_id',
  'HEAD /v3/auth/OS-FEDERATION/websso/:protocol_id',
  'POST /v3/auth/OS-FEDERATION/websso/:protocol_id',
  'GET /v3/auth/OS-FEDERATION/identity_providers/:idp_id/protocols/:protocol_id/websso',
  'HEAD /v3/auth/OS-FEDERATION/identity_providers/:idp_id/protocols/:protocol_id/websso',
  'POST /v3/auth/OS-FEDERATION/identity_providers/:idp_id/protocols/:protocol_id/websso',
  'GET /v3/auth/OS-FEDERATION/websso/:protocol_id/redirect',
  'POST /v3/auth/OS-FEDERATION/websso/:protocol_id/acs',
  // K2K (SAML identity provider): unenforced in Keystone; the body's token is checked
  'GET /v3/OS-FEDERATION/saml2/metadata',
  'POST /v3/auth/OS-FEDERATION/saml2',
  'POST /v3/auth/OS-FEDERATION/saml2/ecp',
  // Shibboleth's ECP consumer (K2K service provider): the posted response is verified, not policy-checked.
  'POST /Shibboleth.sso/SAML2/ECP',
];

/** A row's path reaches a route when each segment is the route's own or fills one of its parameters. */
function rowReaches(row: MatrixRow, route: { method: string; url: string }): boolean {
  const rowSegments = row.path.split('/');
  const routeSegments = route.url.split('/');
  return (
    rowSegments.length === routeSegments.length &&
    rowSegments.every((segment, index) => segment === routeSegments[index] || (routeSegments[index]!.startsWith(':') && segment !== ''))
  );
}

/**
 * The service's routes (app.routes, as registered) that neither a matrix row nor PUBLIC_ROUTES
 * covers, and the public routes that PUBLIC_ROUTES does not expect: a new route fails the matrix
 * test until it has its row. A HEAD route is covered by the row of its GET (same handler and rule).
 */
export function uncoveredRoutes(routes: { method: string; url: string; public: boolean }[], rows: MatrixRow[] = [...PROTECTION_MATRIX, ...OWN_ROWS]): string[] {
  const missing: string[] = [];
  for (const route of routes) {
    const method = route.method === 'HEAD' ? 'GET' : route.method;
    const name = `${method} ${route.url}`;
    if (route.public) {
      if (!PUBLIC_ROUTES.includes(name)) missing.push(`${route.method} ${route.url} (public, but not in PUBLIC_ROUTES)`);
    } else if (PUBLIC_ROUTES.includes(name)) {
      missing.push(`${route.method} ${route.url} (in PUBLIC_ROUTES, but needs a token)`);
    } else if (!rows.some((row) => (row.method === route.method || row.method === method) && rowReaches(row, { method, url: route.url }))) {
      missing.push(`${route.method} ${route.url}`);
    }
  }
  return missing;
}

// ---- running it over HTTP ----------------------------------------------------------------------

/** Every user buildMatrixWorld creates has this password. */
const MATRIX_PASSWORD = 'Matrix-Pw-1';

export interface HttpAnswer {
  status: number;
  body: any;
  subjectToken: string | null;
}

/** A Keystone v3 endpoint reached over real HTTP: ours or the real Keystone. */
export class IdentityClient {
  constructor(readonly baseUrl: string) {}

  async call(method: string, path: string, options: { token?: string; body?: unknown; subject?: string } = {}): Promise<HttpAnswer> {
    const headers: Record<string, string> = {};
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    if (options.token) headers['x-auth-token'] = options.token;
    if (options.subject) headers['x-subject-token'] = options.subject;
    const response = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers,
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
    });
    const text = method === 'HEAD' ? '' : await response.text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = text;
    }
    return { status: response.status, body, subjectToken: response.headers.get('x-subject-token') };
  }

  async login(auth: Record<string, unknown>): Promise<string> {
    const answer = await this.call('POST', '/v3/auth/tokens', { body: { auth } });
    if (answer.status !== 201 || !answer.subjectToken) throw new Error(`login failed: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.subjectToken;
  }
}

export interface MatrixWorld {
  client: IdentityClient;
  admin: string;
  tokens: Record<Exclude<Persona, 'no_token'>, string>;
  users: Record<Exclude<Persona, 'no_token'>, string>;
  ids: { domain: string; project: string; user: string; group: string; other_user: string; role: string };
  /** A token of another user (`:user`), for the X-Subject-Token rows. */
  otherToken: string;
  unique(): string;
}

/**
 * Creates the personas and targets through the API as the admin: domain D with project P, user
 * and group in D (the user a member of the group and holding member on P), a user in Default,
 * and one user per persona with its role and a token of the persona's scope.
 */
export async function buildMatrixWorld(client: IdentityClient, adminName: string, adminPassword: string): Promise<MatrixWorld> {
  const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  let counter = 0;
  const unique = () => `${run}-${++counter}`;
  const admin = await client.login({
    identity: { methods: ['password'], password: { user: { name: adminName, domain: { id: 'default' }, password: adminPassword } } },
    scope: { project: { name: 'admin', domain: { id: 'default' } } },
  });
  const must = async (method: string, path: string, body?: unknown) => {
    const answer = await client.call(method, path, { token: admin, body });
    if (answer.status >= 300) throw new Error(`${method} ${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body;
  };
  const roles: Record<string, string> = {};
  for (const name of ['admin', 'member', 'reader']) roles[name] = (await must('GET', `/v3/roles?name=${name}`)).roles[0].id;
  const domain = (await must('POST', '/v3/domains', { domain: { name: `matrix-${run}` } })).domain.id as string;
  const project = (await must('POST', '/v3/projects', { project: { name: `p-${run}`, domain_id: domain } })).project.id as string;
  const otherProject = (await must('POST', '/v3/projects', { project: { name: `q-${run}`, domain_id: 'default' } })).project.id as string;
  const password = MATRIX_PASSWORD;
  const newUser = async (name: string, domainId: string) => (await must('POST', '/v3/users', { user: { name: `${name}-${run}`, domain_id: domainId, password } })).user.id as string;
  const user = await newUser('target', domain);
  const otherUser = await newUser('outsider', 'default');
  const group = (await must('POST', '/v3/groups', { group: { name: `g-${run}`, domain_id: domain } })).group.id as string;
  await must('PUT', `/v3/groups/${group}/users/${user}`);
  await must('PUT', `/v3/projects/${project}/users/${user}/roles/${roles.member}`);

  const setup: Record<Exclude<Persona, 'no_token'>, { grant: string; scope: Record<string, unknown> }> = {
    system_admin: { grant: `/v3/system/users/:id/roles/${roles.admin}`, scope: { system: { all: true } } },
    system_reader: { grant: `/v3/system/users/:id/roles/${roles.reader}`, scope: { system: { all: true } } },
    domain_admin: { grant: `/v3/domains/${domain}/users/:id/roles/${roles.admin}`, scope: { domain: { id: domain } } },
    domain_reader: { grant: `/v3/domains/${domain}/users/:id/roles/${roles.reader}`, scope: { domain: { id: domain } } },
    project_admin: { grant: `/v3/projects/${project}/users/:id/roles/${roles.admin}`, scope: { project: { id: project } } },
    project_member: { grant: `/v3/projects/${project}/users/:id/roles/${roles.member}`, scope: { project: { id: project } } },
    project_reader: { grant: `/v3/projects/${project}/users/:id/roles/${roles.reader}`, scope: { project: { id: project } } },
    other_project_member: { grant: `/v3/projects/${otherProject}/users/:id/roles/${roles.member}`, scope: { project: { id: otherProject } } },
  };
  const tokens = {} as MatrixWorld['tokens'];
  const users = {} as MatrixWorld['users'];
  for (const [persona, { grant, scope }] of Object.entries(setup) as [Exclude<Persona, 'no_token'>, (typeof setup)['system_admin']][]) {
    const id = await newUser(persona.replace(/_/g, '-'), persona.startsWith('domain') || persona.startsWith('project_') ? domain : 'default');
    await must('PUT', grant.replace(':id', id));
    users[persona] = id;
    tokens[persona] = await client.login({ identity: { methods: ['password'], password: { user: { id, password } } }, scope });
  }
  const otherToken = await client.login({ identity: { methods: ['password'], password: { user: { id: user, password } } }, scope: { project: { id: project } } });
  return { client, admin, tokens, users, ids: { domain, project, user, group, other_user: otherUser, role: roles.member! }, otherToken, unique };
}

/** Creates what a :fresh_* placeholder names, as the admin. */
async function fresh(world: MatrixWorld, kind: string): Promise<string> {
  const { client, admin, ids } = world;
  const name = `f-${world.unique()}`;
  const create: Record<string, [string, unknown, string]> = {
    fresh_domain: ['/v3/domains', { domain: { name, enabled: false } }, 'domain'],
    fresh_project: ['/v3/projects', { project: { name, domain_id: ids.domain } }, 'project'],
    fresh_user: ['/v3/users', { user: { name, domain_id: ids.domain } }, 'user'],
    fresh_group: ['/v3/groups', { group: { name, domain_id: ids.domain } }, 'group'],
    fresh_role: ['/v3/roles', { role: { name } }, 'role'],
    fresh_region: ['/v3/regions', { region: { id: name } }, 'region'],
    fresh_service: ['/v3/services', { service: { type: name } }, 'service'],
  };
  if (kind === 'fresh_endpoint') {
    const service = await fresh(world, 'fresh_service');
    const answer = await client.call('POST', '/v3/endpoints', { token: admin, body: { endpoint: { service_id: service, interface: 'public', url: `http://${name}.test/` } } });
    if (answer.status !== 201) throw new Error(`creating ${kind}: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body.endpoint.id;
  }
  if (kind === 'fresh_registered_limit' || kind === 'fresh_limit') {
    const service = await fresh(world, 'fresh_service');
    const registered = await client.call('POST', '/v3/registered_limits', {
      token: admin,
      body: { registered_limits: [{ service_id: service, resource_name: name, default_limit: 10 }] },
    });
    if (registered.status !== 201) throw new Error(`creating ${kind}: ${registered.status} ${JSON.stringify(registered.body)}`);
    if (kind === 'fresh_registered_limit') return registered.body.registered_limits[0].id;
    const limit = await client.call('POST', '/v3/limits', {
      token: admin,
      body: { limits: [{ project_id: ids.project, service_id: service, resource_name: name, resource_limit: 5 }] },
    });
    if (limit.status !== 201) throw new Error(`creating ${kind}: ${limit.status} ${JSON.stringify(limit.body)}`);
    return limit.body.limits[0].id;
  }
  const [path, body, key] = create[kind]!;
  const answer = await client.call('POST', path, { token: admin, body });
  if (answer.status !== 201) throw new Error(`creating ${kind}: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body[key].id;
}

export type Verdict = 'allowed' | 'denied' | 'unauthenticated';

/**
 * Policy said no: 403 naming the rule, as Keystone's policy denials do. Other 403s (deleting an
 * enabled domain, a catalog for a token without a project) are the operation's, not the policy's.
 */
export function verdictOf(answer: HttpAnswer): Verdict {
  if (answer.status === 401) return 'unauthenticated';
  if (answer.status === 403) {
    const message = String(answer.body?.error?.message ?? '');
    // HEAD answers carry no body: a 403 there is the policy's.
    if (message === '' || message.startsWith('You are not authorized to perform the requested action: identity:')) return 'denied';
  }
  return 'allowed';
}

export function expectedVerdict(row: MatrixRow, persona: Persona): Verdict {
  if (persona === 'no_token') return 'unauthenticated';
  return row.allowed.includes(persona) ? 'allowed' : 'denied';
}

/** Sends one row as one persona and returns what the policy did. */
export async function runCell(world: MatrixWorld, row: MatrixRow, persona: Persona): Promise<{ verdict: Verdict; answer: HttpAnswer }> {
  let path = row.path;
  for (const match of row.path.match(/:[a-z_]+/g) ?? []) {
    const name = match.slice(1);
    let value: string;
    if (name.startsWith('fresh_')) value = await fresh(world, name);
    else if (name === 'unique') value = `m-${world.unique()}`;
    else if (name === 'self') value = persona === 'no_token' ? world.ids.user : world.users[persona];
    else value = world.ids[name as keyof MatrixWorld['ids']];
    path = path.replace(match, value);
  }
  const token = persona === 'no_token' ? undefined : world.tokens[persona];
  const subject =
    row.subject === 'own'
      ? (token ?? world.otherToken)
      : row.subject === 'other'
        ? world.otherToken
        : row.subject === 'fresh_other'
          ? await world.client.login({ identity: { methods: ['password'], password: { user: { id: world.ids.user, password: MATRIX_PASSWORD } } } })
          : undefined;
  const answer = await world.client.call(row.method, path, { token, subject, body: row.body?.(world.unique()) });
  return { verdict: verdictOf(answer), answer };
}
