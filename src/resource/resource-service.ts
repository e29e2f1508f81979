import { cacheRow, LoadingCache, type CacheEpoch } from '../support/cache.ts';
import type { Clock } from '../support/clock.ts';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../support/errors.ts';
import type { Revocations } from '../events/revocation.ts';
import { newId } from '../support/ids.ts';
import type { EntityManager, Store } from '../store/database.ts';
import type { Json, ProjectRow } from '../store/entities.ts';
import { isUniqueViolation, type StringMatch } from '../store/filters.ts';
import { ResourceRepository, type ProjectQuery } from './resource-repository.ts';
import { pagesOf, type Page } from '../store/keyset.ts';

export const DEFAULT_DOMAIN_ID = 'default';
export const MAX_PROJECT_DEPTH = 5;
const MAX_TAGS = 80;

export type Domain = ProjectRow;
export type Project = ProjectRow;

/** Project ids nested as a hierarchy (Keystone's `parents_as_ids` and `subtree_as_ids`). */
export interface ProjectIdTree {
  [id: string]: ProjectIdTree | null;
}

export interface DomainInput {
  id?: string | undefined;
  name: string;
  description?: string | null | undefined;
  enabled?: boolean | undefined;
  tags?: string[] | undefined;
  options?: Json | undefined;
  extra?: Json | undefined;
}

export interface DomainPatch {
  name?: string | undefined;
  description?: string | null | undefined;
  enabled?: boolean | undefined;
  tags?: string[] | undefined;
  options?: Json | undefined;
  extra?: Json | undefined;
}

export interface ProjectInput extends DomainInput {
  domainId: string;
  parentId?: string | null | undefined;
  isDomain?: boolean | undefined;
}

export interface ProjectPatch extends DomainPatch {
  id?: string | undefined;
  domainId?: string | null | undefined;
  parentId?: string | null | undefined;
  isDomain?: boolean | undefined;
}

export interface DomainFilter {
  name?: StringMatch[];
  enabled?: boolean;
  ids?: string[];
}

export type ProjectFilter = Omit<ProjectQuery, 'isDomain'> & { isDomain?: boolean };

/** Domains and projects: the resource tree that scopes users, groups and role assignments. */
export class ResourceService {
  private readonly projects = new ResourceRepository();

  // Lookups of token issue and validation, per data generation (every change here is a committed
  // transaction, so a disabled or deleted domain or project is seen by the next request).
  private readonly byId: LoadingCache<string, ProjectRow | null>;
  private readonly domainsByName: LoadingCache<string, ProjectRow | null>;
  private readonly projectsByName: LoadingCache<string, ProjectRow | null>;

  constructor(
    private readonly store: Store,
    private readonly revocations: Revocations,
    private readonly clock: Clock,
    /** ClusterSync: without it nothing is cached. */
    epoch?: CacheEpoch,
    cacheSize = 20_000,
  ) {
    this.byId = new LoadingCache(cacheSize, epoch);
    this.domainsByName = new LoadingCache(cacheSize, epoch);
    this.projectsByName = new LoadingCache(cacheSize, epoch);
  }

  // ---- domains ---------------------------------------------------------------------------

  async getDomain(id: string, em: EntityManager = this.store.reader()): Promise<Domain> {
    const row = await this.projects.find(em, id);
    if (!row || !row.isDomain) throw NotFoundError.of('domain', id);
    return row;
  }

  /** By exact name; cached (read-only row) unless read in the caller's unit of work `em`. */
  async findDomainByName(name: string, em?: EntityManager): Promise<Domain | null> {
    if (em) return this.projects.findDomainByName(em, name);
    return this.domainsByName.get(name, async () => cacheRow(await this.projects.findDomainByName(this.store.reader(), name)));
  }

  listDomains(filter: DomainFilter): Promise<Domain[]> {
    return this.projects.list(this.store.reader(), { ...filter, isDomain: true });
  }

  createDomain(input: DomainInput): Promise<Domain> {
    if (input.name.toLowerCase() === 'federated') {
      throw new ValidationError('Domain name cannot be "Federated": it is reserved for federated users.');
    }
    const row = this.newRow({ ...input, domainId: '', isDomain: true });
    return this.store
      .transaction(async (em) => {
        await this.projects.insert(em, row);
        return row;
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) {
          throw new ConflictError('project', `it is not permitted to have two projects acting as domains with the same name: ${input.name}`);
        }
        throw error;
      });
  }

  /** Creates a domain in the caller's transaction `em` (OS-FEDERATION: an identity provider's own domain). */
  async createDomainIn(em: EntityManager, input: DomainInput): Promise<Domain> {
    const row = this.newRow({ ...input, domainId: '', isDomain: true });
    await this.projects.insert(em, row);
    return row;
  }

  /**
   * The project of this name in the domain, created (enabled, at the domain's root) when there is
   * none, in the caller's transaction `em`: the projects a federated login's mapping provisions.
   */
  async findOrCreateProjectIn(em: EntityManager, name: string, domainId: string): Promise<Project> {
    const found = await this.projects.findProjectByName(em, name, domainId);
    if (found) return found;
    const row = this.newRow({ name, domainId, parentId: domainId, isDomain: false });
    await this.projects.insert(em, row);
    return row;
  }

  updateDomain(id: string, patch: DomainPatch): Promise<Domain> {
    return this.store
      .transaction(async (em) => {
        const domain = await this.getDomain(id, em);
        this.refuseImmutableUpdate(domain, patch.options, 'domain');
        const disabling = patch.enabled === false && domain.enabled;
        this.applyCommonPatch(domain, patch);
        await this.revokeOnDisable(em, domain, disabling);
        await this.projects.saveChanges(em);
        return domain;
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) {
          throw new ConflictError('project', `it is not permitted to have two projects acting as domains with the same name: ${patch.name}`);
        }
        throw error;
      });
  }

  deleteDomain(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      const domain = await this.getDomain(id, em);
      if (domain.options.immutable === true) throw immutable('delete', 'domain', id);
      if (domain.enabled) throw ForbiddenError.enabledDomainDeletion();
      // Projects, users, groups and domain roles go with it (foreign keys cascade, triggers remove
      // their role assignments); the event revokes every token of its users and projects at once.
      await this.revocations.record(em, { domainId: id });
      await this.projects.delete(em, domain);
    });
  }

  // ---- projects --------------------------------------------------------------------------

  async getProject(id: string, em: EntityManager = this.store.reader()): Promise<Project> {
    const row = await this.projects.find(em, id);
    if (!row) throw NotFoundError.of('project', id);
    return row;
  }

  /**
   * A domain or a project, whichever the id names (for scope checks), or null. Cached (a frozen,
   * read-only row) unless read in the caller's unit of work `em`.
   */
  findAny(id: string, em?: EntityManager): Promise<ProjectRow | null> {
    if (em) return this.projects.find(em, id);
    return this.byId.get(id, async () => cacheRow(await this.projects.find(this.store.reader(), id)));
  }

  /** Cached, read-only. */
  findProjectByName(name: string, domainId: string): Promise<Project | null> {
    return this.projectsByName.get(`${domainId}\u0000${name}`, async () =>
      cacheRow(await this.projects.findProjectByName(this.store.reader(), name, domainId)),
    );
  }

  listProjects(filter: ProjectFilter): Promise<Project[]> {
    return this.projects.list(this.store.reader(), { ...filter, isDomain: filter.isDomain ?? false });
  }

  /** listProjects read `pageSize` rows at a time (keyset pages): the pages in order are its answer. */
  listProjectPages(filter: ProjectFilter, pageSize: number): AsyncGenerator<Page<Project>, void, undefined> {
    const query = { ...filter, isDomain: filter.isDomain ?? false };
    return pagesOf<ProjectRow, Project>(pageSize, (page) => this.projects.list(this.store.reader(), query, page), (rows) => rows);
  }

  ancestors(project: Project, em: EntityManager = this.store.reader()): Promise<Project[]> {
    return this.projects.ancestors(em, project);
  }

  descendants(projectId: string): Promise<Project[]> {
    return this.projects.descendants(this.store.reader(), projectId);
  }

  /**
   * Keystone's `parents_as_ids`: the ancestors' ids nested up to the domain, `{parent: {domain: null}}`;
   * null for a project without a parent (a domain).
   */
  async parentIds(project: Project): Promise<ProjectIdTree | null> {
    let tree: ProjectIdTree | null = null;
    // Nearest first: the domain ends the chain, so it is the innermost key.
    for (const ancestor of (await this.ancestors(project)).reverse()) tree = Object.fromEntries([[ancestor.id, tree]]);
    return tree;
  }

  /** Keystone's `subtree_as_ids`: the descendants' ids nested by parent, a leaf's value null; null without children. */
  async subtreeIds(projectId: string): Promise<ProjectIdTree | null> {
    const childrenOf = new Map<string, Project[]>();
    for (const project of await this.descendants(projectId)) {
      const siblings = childrenOf.get(project.parentId!) ?? [];
      siblings.push(project);
      childrenOf.set(project.parentId!, siblings);
    }
    const below = (id: string): ProjectIdTree | null => {
      const children = childrenOf.get(id);
      // fromEntries: an id such as `__proto__` (an explicit domain id) stays a key, not a prototype.
      return children ? Object.fromEntries(children.map((child) => [child.id, below(child.id)])) : null;
    };
    return below(projectId);
  }

  async createProject(input: ProjectInput): Promise<Project> {
    if (input.isDomain) {
      // As Keystone: a project acting as a domain is a root (no parent, no domain of its own).
      if (input.parentId || input.domainId) throw new ValidationError('only root projects are allowed to act as domains.');
      return this.createDomain(input);
    }
    return this.store
      .transaction(async (em) => {
        const domain = await this.projects.find(em, input.domainId);
        if (!domain || !domain.isDomain) throw new ValidationError(`Could not find domain: ${input.domainId}.`);
        const parentId = input.parentId ?? domain.id;
        if (parentId !== domain.id) {
          const parent = await this.projects.find(em, parentId);
          if (!parent) throw new ValidationError(`Could not find project: ${parentId}.`);
          if (parent.isDomain) {
            throw new ValidationError(
              `Cannot create project, the parent (${parent.id}) is acting as a domain, but this project's domain id (${domain.id}) does not match the parent's id.`,
            );
          }
          if (parent.domainId !== domain.id) {
            throw new ValidationError('Cannot create project, the parent and the project must be in the same domain.');
          }
          if (!parent.enabled) {
            throw new ForbiddenError(`Cannot create project, since it specifies its parent (${parent.id}) as a disabled project.`);
          }
          const depth = (await this.projects.ancestors(em, parent)).filter((row) => !row.isDomain).length + 2;
          if (depth > MAX_PROJECT_DEPTH) throw new ForbiddenError(`Max hierarchy depth reached for ${parent.id} branch.`);
        }
        const row = this.newRow({ ...input, domainId: domain.id, parentId, isDomain: false });
        await this.projects.insert(em, row);
        return row;
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) {
          throw new ConflictError(
            'project',
            `it is not permitted to have two projects with either the same name or same id in the same domain: name is ${input.name}, project id ${input.id ?? ''}`,
          );
        }
        throw error;
      });
  }

  updateProject(id: string, patch: ProjectPatch): Promise<Project> {
    return this.store
      .transaction(async (em) => {
        const project = await this.getProject(id, em);
        if (patch.id !== undefined && patch.id !== id) throw ValidationError.idChange();
        if (patch.domainId !== undefined && patch.domainId !== project.domainId) throw ValidationError.domainChange();
        if (patch.isDomain !== undefined && patch.isDomain !== project.isDomain) {
          throw new ValidationError('Update of `is_domain` is not allowed.');
        }
        if (patch.parentId !== undefined && patch.parentId !== project.parentId) {
          throw new ForbiddenError('Update of `parent_id` is not allowed.');
        }
        this.refuseImmutableUpdate(project, patch.options, 'project');
        // A project acting as a domain is disabled with its projects enabled, as a domain is.
        if (patch.enabled === false && project.enabled && !project.isDomain) {
          const children = await this.projects.children(em, id);
          if (children.some((child) => child.enabled)) {
            throw new ForbiddenError(`Cannot disable project ${id} since its subtree contains enabled projects.`);
          }
        }
        if (patch.enabled === true && !project.enabled && project.parentId) {
          const disabled = (await this.projects.ancestors(em, project)).filter((row) => !row.isDomain && !row.enabled);
          if (disabled.length) {
            throw new ForbiddenError(`Cannot enable project ${id} since it has disabled parents: ${disabled.map((row) => row.id).join(', ')}`);
          }
        }
        const disabling = patch.enabled === false && project.enabled;
        this.applyCommonPatch(project, patch);
        await this.revokeOnDisable(em, project, disabling);
        await this.projects.saveChanges(em);
        return project;
      })
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) {
          throw new ConflictError(
            'project',
            `it is not permitted to have two projects with either the same name or same id in the same domain: name is ${patch.name}, project id ${id}`,
          );
        }
        throw error;
      });
  }

  deleteProject(id: string): Promise<void> {
    return this.store.transaction(async (em) => {
      const project = await this.getProject(id, em);
      if (project.options.immutable === true) throw immutable('delete', 'project', id);
      if (project.isDomain) {
        if (project.enabled) throw ForbiddenError.enabledDomainDeletion();
      } else if ((await this.projects.children(em, id)).length) {
        throw new ForbiddenError(
          `Cannot delete the project ${id} since it is not a leaf in the hierarchy. Use the cascade option if you want to delete a whole subtree.`,
        );
      }
      await this.revocations.record(em, project.isDomain ? { domainId: id } : { projectId: id });
      await this.projects.delete(em, project);
    });
  }

  // ---- project tags ----------------------------------------------------------------------

  async replaceTags(projectId: string, tags: string[]): Promise<string[]> {
    validateTags(tags);
    return this.store.transaction(async (em) => {
      const project = await this.getProject(projectId, em);
      project.tags = [...tags];
      await this.projects.saveChanges(em);
      return project.tags;
    });
  }

  async addTag(projectId: string, tag: string): Promise<void> {
    validateTags([tag]);
    await this.store.transaction(async (em) => {
      const project = await this.getProject(projectId, em);
      if (project.tags.includes(tag)) return;
      if (project.tags.length >= MAX_TAGS) throw tooManyTags();
      project.tags = [...project.tags, tag];
      await this.projects.saveChanges(em);
    });
  }

  async removeTag(projectId: string, tag: string): Promise<void> {
    await this.store.transaction(async (em) => {
      const project = await this.getProject(projectId, em);
      if (!project.tags.includes(tag)) throw new NotFoundError(`Could not find project tag: ${tag}.`);
      project.tags = project.tags.filter((existing) => existing !== tag);
      await this.projects.saveChanges(em);
    });
  }

  // ---- helpers ---------------------------------------------------------------------------

  private newRow(input: ProjectInput): ProjectRow {
    if (input.tags) validateTags(input.tags);
    const options = cleanOptions({}, input.options);
    return {
      id: input.id ?? newId(),
      name: input.name,
      domainId: input.isDomain ? null : input.domainId,
      parentId: input.isDomain ? null : (input.parentId ?? input.domainId),
      isDomain: input.isDomain ?? false,
      enabled: input.enabled ?? true,
      description: input.description ?? '',
      extra: input.extra ?? {},
      options,
      tags: input.tags ?? [],
      createdAt: new Date(this.clock.now()),
    };
  }

  private applyCommonPatch(row: ProjectRow, patch: DomainPatch): void {
    if (patch.name !== undefined) row.name = patch.name;
    if (patch.description !== undefined) row.description = patch.description ?? '';
    if (patch.enabled !== undefined) row.enabled = patch.enabled;
    if (patch.tags !== undefined) {
      validateTags(patch.tags);
      row.tags = [...patch.tags];
    }
    if (patch.options !== undefined) row.options = cleanOptions(row.options, patch.options);
    if (patch.extra !== undefined && Object.keys(patch.extra).length) row.extra = { ...row.extra, ...patch.extra };
  }

  /**
   * Disabling takes access away, so it records a revocation event (Keystone 22 does not): tokens
   * issued before stay dead when the project or domain is enabled again. A domain's event matches
   * tokens of its users and tokens scoped to it or to its projects.
   */
  private async revokeOnDisable(em: EntityManager, row: ProjectRow, disabling: boolean): Promise<void> {
    if (!disabling) return;
    await this.revocations.record(em, row.isDomain ? { domainId: row.id } : { projectId: row.id });
  }

  private refuseImmutableUpdate(row: ProjectRow, options: Json | undefined, type: string): void {
    if (row.options.immutable !== true) return;
    // Clearing the option is the one update an immutable resource accepts.
    if (options && options.immutable === false) return;
    throw immutable('update', type, row.id);
  }
}

function immutable(action: 'update' | 'delete', type: string, id: string): ForbiddenError {
  return new ForbiddenError(`Unable to ${action} immutable ${type} resource: \`${id}. Set resource option "immutable" to false first.`);
}

/** Merges option changes; a null value removes the option. */
export function cleanOptions(current: Json, changes: Json | undefined): Json {
  const options: Json = { ...current };
  for (const [name, value] of Object.entries(changes ?? {})) {
    if (value === null) delete options[name];
    else options[name] = value;
  }
  return options;
}

function validateTags(tags: string[]): void {
  if (tags.length > MAX_TAGS) throw tooManyTags();
  if (new Set(tags).size !== tags.length) throw new ValidationError('Tags must be unique.');
  for (const tag of tags) {
    if (tag.length < 1 || tag.length > 255 || tag.includes('/') || tag.includes(',')) {
      throw new ValidationError(`Invalid project tag '${tag}': 1 to 255 characters, without '/' or ','.`);
    }
  }
}

function tooManyTags(): ValidationError {
  return new ValidationError(`A project may have at most ${MAX_TAGS} tags.`);
}
