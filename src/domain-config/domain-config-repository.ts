import type { EntityManager } from '../store/database.ts';
import { DomainConfigOptionEntity, type DomainConfigOptionRow } from '../store/entities.ts';

/** One option of a domain's configuration, as stored. */
export interface StoredOption {
  group: string;
  option: string;
  value: unknown;
  sensitive: boolean;
}

const ORDER = { domainId: 'asc', groupName: 'asc', optionName: 'asc' } as const;

function toOption(row: DomainConfigOptionRow): StoredOption {
  return { group: row.groupName, option: row.optionName, value: row.value ?? null, sensitive: row.sensitive };
}

/** Storage of domain configurations (Keystone's whitelisted_config and sensitive_config, one table with a flag). */
export class DomainConfigRepository {
  /** Every stored option of every domain, by domain id (for the map of configured domains). */
  async listAll(em: EntityManager): Promise<Map<string, StoredOption[]>> {
    const rows = await em.find(DomainConfigOptionEntity, {}, { orderBy: ORDER });
    const byDomain = new Map<string, StoredOption[]>();
    for (const row of rows) {
      let options = byDomain.get(row.domainId);
      if (!options) byDomain.set(row.domainId, (options = []));
      options.push(toOption(row));
    }
    return byDomain;
  }

  /** A domain's options, by group then option name. */
  async list(em: EntityManager, domainId: string): Promise<StoredOption[]> {
    const rows = await em.find(DomainConfigOptionEntity, { domainId }, { orderBy: ORDER });
    return rows.map(toOption);
  }

  /** Writers of one domain's configuration take turns (until the transaction ends). */
  async lock(em: EntityManager, domainId: string): Promise<void> {
    await em.execute('select pg_advisory_xact_lock(hashtext(?))', [`domain_config:${domainId}`]);
  }

  /** Writes these options (replacing the values of those already stored). */
  async write(em: EntityManager, domainId: string, options: readonly StoredOption[]): Promise<void> {
    for (const { group, option, value, sensitive } of options) {
      await em.nativeDelete(DomainConfigOptionEntity, { domainId, groupName: group, optionName: option });
      await em.insert(DomainConfigOptionEntity, { domainId, groupName: group, optionName: option, value: value as never, sensitive });
    }
  }

  /** Removes a domain's whole configuration, a group of it, or one option. */
  async delete(em: EntityManager, domainId: string, group?: string, option?: string): Promise<void> {
    await em.nativeDelete(DomainConfigOptionEntity, {
      domainId,
      ...(group === undefined ? {} : { groupName: group }),
      ...(option === undefined ? {} : { optionName: option }),
    });
  }
}
