import { raw } from '@mikro-orm/core';
import type { EntityManager } from '../store/database.ts';
import { RoleEntity, TrustEntity, TrustRoleEntity, type RoleRow, type TrustRow } from '../store/entities.ts';

/** Storage of trusts and the roles they delegate. A deleted trust (deleted_at set) is never found. */
export class TrustRepository {
  findTrust(em: EntityManager, id: string): Promise<TrustRow | null> {
    return em.findOne(TrustEntity, { id, deletedAt: null });
  }

  /** Live trusts, optionally of one trustor and/or one trustee. */
  listTrusts(em: EntityManager, filter: { trustorUserId?: string | undefined; trusteeUserId?: string | undefined }): Promise<TrustRow[]> {
    return em.find(
      TrustEntity,
      {
        deletedAt: null,
        ...(filter.trustorUserId !== undefined ? { trustorUserId: filter.trustorUserId } : {}),
        ...(filter.trusteeUserId !== undefined ? { trusteeUserId: filter.trusteeUserId } : {}),
      },
      { orderBy: { id: 'asc' } },
    );
  }

  /** Writes the trust and its roles now. */
  async createTrust(em: EntityManager, trust: TrustRow, roleIds: readonly string[]): Promise<void> {
    em.create(TrustEntity, trust);
    await em.flush();
    for (const roleId of roleIds) em.create(TrustRoleEntity, { trustId: trust.id, roleId });
    await em.flush();
  }

  /** The trust's roles, in the order roles were created. */
  async rolesOf(em: EntityManager, trustId: string): Promise<RoleRow[]> {
    const links = await em.find(TrustRoleEntity, { trustId });
    if (!links.length) return [];
    return em.find(RoleEntity, { id: { $in: links.map((link) => link.roleId) } }, { orderBy: { [raw('position')]: 'asc' } });
  }

  /** Soft-deletes a live trust; false when there was none. */
  async deleteTrust(em: EntityManager, id: string, now: Date): Promise<boolean> {
    return (await em.nativeUpdate(TrustEntity, { id, deletedAt: null }, { deletedAt: now })) > 0;
  }

  /**
   * Takes one use of a live, unexpired trust in one statement (two concurrent issues cannot both take
   * the last one): the uses left afterwards (null: unlimited), or undefined when there was none to
   * take. The trust whose last use this was is deleted, as Keystone does.
   */
  async consumeUse(em: EntityManager, id: string, now: Date): Promise<number | null | undefined> {
    const rows: { remaining_uses: number | null }[] = await em.execute(
      `update trust set
         remaining_uses = case when remaining_uses is null then null else remaining_uses - 1 end,
         deleted_at = case when remaining_uses = 1 then ? else deleted_at end
       where id = ? and deleted_at is null and (remaining_uses is null or remaining_uses > 0)
         and (expires_at is null or expires_at > ?)
       returning remaining_uses`,
      [now, id, now],
    );
    if (!rows.length) return undefined;
    return rows[0]!.remaining_uses;
  }
}
