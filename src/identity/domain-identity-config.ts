/** A domain's own configuration groups as Keystone's domain config API holds them, e.g. { identity: { driver: 'ldap' }, ldap: { url: '...', ... } }. */
export type DomainConfigGroups = Record<string, Record<string, unknown>>;

/** Where the repository learns which domains have a back end of their own. */
export interface DomainIdentityConfigSource {
  /** Every domain that has a configuration of its own, by domain id (cached, synchronous). */
  configured(): ReadonlyMap<string, DomainConfigGroups>;
  /** Called after any domain's configuration changed (on any node); the repository rebuilds the affected back ends. */
  onChange(listener: (domainId: string) => void): void;
}

/** The source when nothing configures a domain: every domain uses the default (SQL) back end. */
export const NO_DOMAIN_CONFIGS: DomainIdentityConfigSource = {
  configured: () => new Map(),
  onChange: () => {},
};

/** The identity driver a domain's configuration names (`[identity] driver`), or undefined for the default. */
export function identityDriverOf(groups: DomainConfigGroups | undefined): string | undefined {
  const driver = groups?.identity?.driver;
  return typeof driver === 'string' && driver.trim() !== '' ? driver.trim().toLowerCase() : undefined;
}
