import type { EntityManager } from '../store/database.ts';
import { ProjectEntity, type ProjectRow } from '../store/entities.ts';
import { stringConditions, type StringMatch } from '../store/filters.ts';
import { after, orderByOf, type PageRequest, type SortKey } from '../store/keyset.ts';
import { plainRows } from '../store/plain-rows.ts';

export interface ProjectQuery {
  ids?: string[];
  name?: StringMatch[];
  domainId?: string;
  parentId?: string;
  enabled?: boolean;
  isDomain?: boolean;
  /** Every tag must be present. */
  tagsAll?: string[];
  tagsAny?: string[];
  notTagsAll?: string[];
  notTagsAny?: string[];
}

/** The order of project and domain lists (name, then id: unique). */
export const PROJECT_ORDER: readonly SortKey<ProjectRow>[] = [
  { property: 'name', column: 'name', direction: 'asc' },
  { property: 'id', column: 'id', direction: 'asc' },
];

/** Storage of domains and projects (one table; a domain is a project with is_domain). */
export class ResourceRepository {
  find(em: EntityManager, id: string): Promise<ProjectRow | null> {
    return em.findOne(ProjectEntity, { id });
  }

  findDomainByName(em: EntityManager, name: string): Promise<ProjectRow | null> {
    return em.findOne(ProjectEntity, { name, isDomain: true });
  }

  findProjectByName(em: EntityManager, name: string, domainId: string): Promise<ProjectRow | null> {
    return em.findOne(ProjectEntity, { name, domainId, isDomain: false });
  }

  /** The projects matching `query` in PROJECT_ORDER; with `page`, only that page of them. */
  list(em: EntityManager, query: ProjectQuery, page?: PageRequest<ProjectRow>): Promise<ProjectRow[]> {
    const and: Record<string, unknown>[] = [];
    if (query.ids) and.push({ id: { $in: query.ids } });
    if (query.name) and.push(...stringConditions('name', query.name));
    if (query.domainId !== undefined) and.push({ domainId: query.domainId });
    if (query.parentId !== undefined) and.push({ parentId: query.parentId });
    if (query.enabled !== undefined) and.push({ enabled: query.enabled });
    if (query.isDomain !== undefined) and.push({ isDomain: query.isDomain });
    // jsonb containment keeps tag filters in the database: tags @> '["a","b"]'.
    if (query.tagsAll?.length) and.push({ tags: { $contains: query.tagsAll } });
    if (query.tagsAny?.length) and.push({ $or: query.tagsAny.map((tag) => ({ tags: { $contains: [tag] } })) });
    if (query.notTagsAll?.length) and.push({ $not: { tags: { $contains: query.notTagsAll } } });
    if (query.notTagsAny?.length) and.push(...query.notTagsAny.map((tag) => ({ $not: { tags: { $contains: [tag] } } })));
    if (page?.after) and.push(after(PROJECT_ORDER, page.after));
    return plainRows<ProjectRow>(em, ProjectEntity, and.length ? { $and: and } : {}, { orderBy: orderByOf(PROJECT_ORDER), limit: page?.limit });
  }

  children(em: EntityManager, parentId: string): Promise<ProjectRow[]> {
    return em.find(ProjectEntity, { parentId, isDomain: false }, { orderBy: { name: 'asc' } });
  }

  /** The project's ancestors, nearest first, up to and including its domain. */
  async ancestors(em: EntityManager, project: ProjectRow): Promise<ProjectRow[]> {
    const chain: ProjectRow[] = [];
    const seen = new Set([project.id]);
    let parentId = project.parentId;
    while (parentId && !seen.has(parentId)) {
      const parent = await this.find(em, parentId);
      if (!parent) break;
      chain.push(parent);
      seen.add(parent.id);
      parentId = parent.parentId;
    }
    return chain;
  }

  /** Every project below the given one, breadth first. */
  async descendants(em: EntityManager, projectId: string): Promise<ProjectRow[]> {
    const found: ProjectRow[] = [];
    let frontier = [projectId];
    const seen = new Set(frontier);
    while (frontier.length) {
      const level = await em.find(ProjectEntity, { parentId: { $in: frontier }, isDomain: false }, { orderBy: { name: 'asc' } });
      frontier = [];
      for (const project of level) {
        if (seen.has(project.id)) continue;
        seen.add(project.id);
        found.push(project);
        frontier.push(project.id);
      }
    }
    return found;
  }

  /** Writes the new row now (a duplicate name fails here, inside the caller's transaction). */
  async insert(em: EntityManager, row: ProjectRow): Promise<void> {
    em.create(ProjectEntity, row);
    await em.flush();
  }

  /** Writes the changes made to rows read in `em`. */
  async saveChanges(em: EntityManager): Promise<void> {
    await em.flush();
  }

  /** Deletes the row; what refers to it goes by foreign-key cascade and triggers (migrations). */
  async delete(em: EntityManager, row: ProjectRow): Promise<void> {
    em.remove(row);
    await em.flush();
  }
}
