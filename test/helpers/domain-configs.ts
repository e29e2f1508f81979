import type { DomainConfigGroups, DomainIdentityConfigSource } from '../../src/identity/domain-identity-config.ts';

/** Domain configurations held in memory: set or remove one and the listeners hear of it at once. */
export class MemoryDomainConfigs implements DomainIdentityConfigSource {
  private readonly configs = new Map<string, DomainConfigGroups>();
  private readonly listeners: Array<(domainId: string) => void> = [];

  configured(): ReadonlyMap<string, DomainConfigGroups> {
    return this.configs;
  }

  onChange(listener: (domainId: string) => void): void {
    this.listeners.push(listener);
  }

  set(domainId: string, groups: DomainConfigGroups): void {
    this.configs.set(domainId, groups);
    for (const listener of this.listeners) listener(domainId);
  }

  delete(domainId: string): void {
    this.configs.delete(domainId);
    for (const listener of this.listeners) listener(domainId);
  }
}
