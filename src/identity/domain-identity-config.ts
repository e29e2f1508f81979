/** A domain's own configuration groups as Keystone's domain config API holds them, e.g. { identity: { driver: 'ldap' }, ldap: { url: '...', ... } }. */
export type DomainConfigGroups = Record<string, Record<string, unknown>>;
/** Where the repository learns which domains have a back end of their own. */
export interface DomainIdentityConfigSource {
  /** Every domain that has a configuration of its own, by domain id (cached, synchronous). */
  configured(): ReadonlyMap<string, DomainConfigGroups>;
  /** Called after any domain's configuration changed (on any node); the repository rebuilds the affected back ends. */
  onChange(listener: (domainId: string) => void): void;
}
