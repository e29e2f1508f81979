import type { TableWrites, WriteKind } from '../store/database.ts';

/**
 * What a committed change may have changed, as the caches see it. Each cache drops what it holds
 * when a topic it depends on changes (here or on another node), and keeps it otherwise.
 *
 * - `*-added` topics are new users, groups, domains and projects: nothing a validated token holds
 *   can refer to a row that did not exist, but a lookup that found nothing (by name, by id) may now
 *   find it.
 * - `keys`: the token keys (a token valid under the old ones may not be under the new, and back).
 * - `domain-config`: a domain's own configuration (its identity back end), held by the domain
 *   config service's map of configured domains.
 * - `service-provider`: the K2K service providers that token bodies list.
 *
 * Gateway and identity policies are files: a reload builds a new policy with its own caches, so no
 * topic says so.
 */
export const CHANGE_TOPICS = ['revocation', 'identity', 'identity-added', 'resource', 'resource-added', 'assignment', 'credential', 'catalog', 'keys', 'domain-config', 'service-provider'] as const;
export type ChangeTopic = (typeof CHANGE_TOPICS)[number];

export function isChangeTopic(value: unknown): value is ChangeTopic {
  return typeof value === 'string' && (CHANGE_TOPICS as readonly string[]).includes(value);
}

/** What each cache holds, so what must drop it. Where unsure, a cache depends on more (see each). */
export const CACHE_TOPICS = {
  /**
   * Validated tokens: the user (name, domain, enabled, password expiry), the scope's project and
   * domain, the effective roles (assignments, groups, implied roles, the project tree), the
   * application credential, revocation events, and the keys. Not the catalog: a token body's
   * catalog is built per response. Only tokens found good are kept, so new rows change nothing.
   */
  tokenValidation: ['revocation', 'identity', 'resource', 'assignment', 'credential', 'keys'],
  /** Users by id and name, current passwords: identity rows (a domain deleted cascades to them: see topicsOfWrites). */
  identity: ['identity', 'identity-added'],
  /** Domains and projects by id and name. */
  resource: ['resource', 'resource-added'],
  /** Application credentials with their roles (names) and access rules; their user's deletion cascades to them. */
  credential: ['credential', 'assignment'],
  /** Effective roles per user and scope: assignments, roles and implications, group memberships, the project tree. */
  effectiveRoles: ['assignment', 'identity', 'resource', 'resource-added'],
  /** Services, endpoints and regions: the built catalogs, the gateway's upstream table and X-Service-Catalog. */
  catalog: ['catalog'],
  /** Each domain's own configuration (API and files): the identity back ends built from it. */
  domainConfig: ['domain-config'],
  /** The enabled K2K service providers every token body lists. */
  serviceProviders: ['service-provider'],
} as const satisfies Record<string, readonly ChangeTopic[]>;

/**
 * Which topics a table's writes change. A delete also changes what the database removes with it
 * (foreign keys `on delete cascade`, and the triggers that remove a deleted actor's or target's
 * role assignments): see migrations/.
 */
const TABLE_TOPICS: Record<string, { write: readonly ChangeTopic[]; insert?: readonly ChangeTopic[]; delete?: readonly ChangeTopic[] }> = {
  // Domains and projects. Deleting one takes its users, groups, roles, assignments and credentials,
  // its OS-EP-FILTER associations and (a domain) its configuration.
  project: { write: ['resource'], insert: ['resource-added'], delete: ['resource', 'identity', 'assignment', 'credential', 'catalog', 'domain-config'] },
  // A user deleted takes its passwords, memberships, assignments, credentials and access rules.
  identity_user: { write: ['identity'], insert: ['identity-added'], delete: ['identity', 'assignment', 'credential'] },
  identity_group: { write: ['identity'], insert: ['identity-added'], delete: ['identity', 'assignment'] },
  // A password row alone (a new user's) changes no validated token: a password change also records
  // a revocation event for the user (and expires or removes the rows before it), which drops them.
  password: { write: ['identity'], insert: ['identity-added'] },
  // Memberships give roles through groups.
  group_membership: { write: ['identity', 'assignment'] },
  // A role deleted takes its implications, assignments and credentials' roles.
  role: { write: ['assignment'], delete: ['assignment', 'credential'] },
  implied_role: { write: ['assignment'] },
  role_assignment: { write: ['assignment'] },
  // Bumped with a change that takes access away (written alongside it).
  access_epoch: { write: ['assignment'] },
  region: { write: ['catalog'] },
  service: { write: ['catalog'] },
  endpoint: { write: ['catalog'] },
  // Policy blobs and their endpoint associations (/v3/policies) are stored and handed out, never
  // enforced here and held by no cache: their writes change no topic.
  policy: { write: [] },
  policy_association: { write: [] },
  // OS-EP-FILTER associations decide which endpoints a project's catalog (and gateway) shows.
  project_endpoint: { write: ['catalog'] },
  endpoint_group: { write: ['catalog'] },
  project_endpoint_group: { write: ['catalog'] },
  // Unified limits: no cache holds them (each request reads them), so their writes change no topic.
  registered_limit: { write: [] },
  limit: { write: [] },
  // A domain's own configuration (/v3/domains/{id}/config): its identity back end, so which users
  // and groups it holds, their memberships, and the effective roles and validated tokens of its
  // users (cached rows came from the old back end).
  domain_config_option: { write: ['domain-config', 'identity', 'assignment'] },
  // Credentials (/v3/credentials, OS-EC2): no cache holds them (ec2tokens reads the row each time).
  credential: { write: [] },
  revocation_event: { write: ['revocation'] },
  // UUID tokens are rows: deleting one revokes it.
  token: { write: ['revocation'] },
  application_credential: { write: ['credential'] },
  application_credential_role: { write: ['credential'] },
  access_rule: { write: ['credential'] },
  application_credential_access_rule: { write: ['credential'] },
  // Trusts are held by validated trust-scoped tokens (a use consumed may delete one), like credentials.
  trust: { write: ['credential'] },
  trust_role: { write: ['credential'] },
  // OS-OAUTH1: no cache holds consumers or request tokens; validated OAuth tokens hold their access
  // token, which goes when it or its consumer is deleted. Nonces are bookkeeping.
  oauth1_consumer: { write: [], delete: ['credential'] },
  oauth1_request_token: { write: [] },
  oauth1_access_token: { write: [], delete: ['credential'] },
  oauth1_nonce: { write: [] },
  // OS-FEDERATION: no cache holds mappings or protocols (each login reads them); the enabled
  // service providers are listed in every token body (cached); a provider's domain deleted takes
  // them by cascade. Validated federated tokens hold their
  // provider's being there and enabled (as trusts are held: the credential topic).
  identity_provider: { write: ['credential'] },
  idp_remote_ids: { write: [] },
  mapping: { write: [] },
  federation_protocol: { write: [] },
  service_provider: { write: ['service-provider'] },
  federated_user: { write: [] },
  token_key: { write: ['keys'] },
  token_key_generation: { write: ['keys'] },
  key_fingerprint: { write: ['keys'] },
};

/** The topics a committed transaction changed: every topic when its writes are not known, or touch an unmapped table. */
export function topicsOfWrites(writes: TableWrites | undefined): ReadonlySet<ChangeTopic> {
  if (!writes || writes.unknown) return ALL;
  const topics = new Set<ChangeTopic>();
  for (const [table, kinds] of writes.tables) {
    const mapped = TABLE_TOPICS[table];
    if (!mapped) return ALL;
    for (const kind of kinds) for (const topic of topicsOfKind(mapped, kind)) topics.add(topic);
  }
  return topics;
}

function topicsOfKind(mapped: (typeof TABLE_TOPICS)[string], kind: WriteKind): readonly ChangeTopic[] {
  if (kind === 'insert') return mapped.insert ?? mapped.write;
  if (kind === 'delete') return mapped.delete ?? mapped.write;
  return mapped.write;
}

const ALL: ReadonlySet<ChangeTopic> = new Set(CHANGE_TOPICS);

/** Every topic: when what changed is not known (a message missed, an older node's message, a partition's end). */
export const ALL_TOPICS: ReadonlySet<ChangeTopic> = ALL;
