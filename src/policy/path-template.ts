// Path templates of gateway rule lines ('/v2.1/{project_id}/servers/*', '/images/**'): compiled
// once at load, matched against a request's canonical path segments, and indexed in a segment trie
// that finds the lines whose template has a request path's shape.

const PLACEHOLDER = /^\{[A-Za-z_][A-Za-z0-9_]*\}$/;

export type TemplateSegment =
  | { kind: 'literal'; value: string }
  | { kind: 'one' }
  | { kind: 'project' }
  | { kind: 'user' }
  | { kind: 'rest' };

export interface PathTemplate {
  segments: TemplateSegment[];
  /** Position of the single '**' segment, or -1. */
  rest: number;
  /** The owner placeholders, located in the request path (fixed even with a '**'). */
  owners: OwnerSegment[];
}

export interface OwnerSegment {
  kind: 'project' | 'user';
  /** Index into the request's segments: from the start if >= 0, from the end if negative. */
  offset: number;
}

/** Compiles a path template, or returns why it is invalid. */
export function compileTemplate(template: string): PathTemplate | string {
  if (!template.startsWith('/')) return `path template '${template}' must start with '/'`;
  const parts = template.slice(1).split('/');
  const segments: TemplateSegment[] = [];
  const ownerPositions: { kind: OwnerSegment['kind']; position: number }[] = [];
  let rest = -1;
  for (const [position, part] of parts.entries()) {
    // An empty part is only the root template '/' or a deliberate trailing slash.
    if (part === '' && position !== parts.length - 1) return `path template '${template}' has an empty segment`;
    if (part === '**') {
      if (rest !== -1) return `path template '${template}' may use '**' only once`;
      rest = position;
      segments.push({ kind: 'rest' });
    } else if (part === '*') {
      segments.push({ kind: 'one' });
    } else if (part === '{project_id}') {
      segments.push({ kind: 'project' });
      ownerPositions.push({ kind: 'project', position });
    } else if (part === '{user_id}') {
      segments.push({ kind: 'user' });
      ownerPositions.push({ kind: 'user', position });
    } else if (PLACEHOLDER.test(part)) {
      segments.push({ kind: 'one' });
    } else if (/[*{}]/.test(part)) {
      return `path template '${template}': '*', '**' and '{name}' must be whole segments (in '${part}')`;
    } else {
      segments.push({ kind: 'literal', value: part });
    }
  }
  // After a '**' a segment sits at a fixed distance from the end of the path.
  const owners = ownerPositions.map(({ kind, position }) => ({
    kind,
    offset: rest !== -1 && position > rest ? position - segments.length : position,
  }));
  return { segments, rest, owners };
}

function segmentMatches(segment: TemplateSegment, value: string, projectId: string, userId: string): boolean {
  switch (segment.kind) {
    case 'literal':
      return value === segment.value;
    case 'one':
      return value !== '';
    case 'project':
      return value !== '' && value === projectId;
    case 'user':
      return value !== '' && value === userId;
    case 'rest':
      return true;
  }
}

/** Whether the request path's segments fit the template, owner placeholders holding these ids. */
export function templateMatches(template: PathTemplate, path: string[], projectId: string, userId: string): boolean {
  const { segments, rest } = template;
  if (rest === -1) {
    if (segments.length !== path.length) return false;
    for (let i = 0; i < segments.length; i++) if (!segmentMatches(segments[i]!, path[i]!, projectId, userId)) return false;
    return true;
  }
  const suffix = segments.length - rest - 1;
  if (path.length < rest + suffix) return false;
  for (let i = 0; i < rest; i++) if (!segmentMatches(segments[i]!, path[i]!, projectId, userId)) return false;
  for (let k = 1; k <= suffix; k++) {
    if (!segmentMatches(segments[segments.length - k]!, path[path.length - k]!, projectId, userId)) return false;
  }
  return true;
}

/**
 * A segment trie over one method's templates: finds the lines whose template has the request
 * path's shape, so the matcher evaluates a handful of lines instead of the whole file. Owner
 * placeholders index as any segment; their equality is left to pathMatch.
 */
export class PathIndex {
  private readonly root: PathNode;

  /** `nodeIds` numbers the nodes; indexes sharing one (a service's) never repeat an id. */
  constructor(private readonly nodeIds: NodeIds) {
    this.root = new PathNode(nodeIds.next());
  }

  add(template: PathTemplate, position: number): void {
    let node = this.root;
    for (const segment of template.segments) {
      if (segment.kind === 'literal') {
        let child = node.literal.get(segment.value);
        if (!child) node.literal.set(segment.value, (child = new PathNode(this.nodeIds.next())));
        node = child;
      } else if (segment.kind === 'rest') {
        node = node.rest ??= new PathNode(this.nodeIds.next());
      } else {
        node = node.one ??= new PathNode(this.nodeIds.next());
      }
    }
    node.addLine(position, template.owners);
  }

  /** The nodes holding the lines whose template can match `path`. */
  candidateNodes(path: string[]): PathNode[] {
    const found: PathNode[] = [];
    collect(this.root, path, 0, found);
    return found;
  }
}

/** Numbers the nodes of one service's indexes, so a decision key can name the nodes a request reached. */
export class NodeIds {
  private count = 0;

  next(): number {
    return this.count++;
  }
}

const NO_OWNER_SETS: readonly OwnerSegment[][] = Object.freeze([]);

export class PathNode {
  readonly literal = new Map<string, PathNode>();
  one: PathNode | undefined;
  rest: PathNode | undefined;
  /** Positions of the lines whose template ends here, ascending (they are added in file order). */
  readonly lines: number[] = [];
  /** The distinct owner placeholders of those lines (lines without any are not listed); shared while empty, to save memory. */
  ownerSets: readonly OwnerSegment[][] = NO_OWNER_SETS;

  constructor(readonly id: number) {}

  addLine(position: number, owners: OwnerSegment[]): void {
    this.lines.push(position);
    if (owners.length > 0 && !this.ownerSets.some((known) => sameOwners(known, owners))) this.ownerSets = [...this.ownerSets, owners];
  }
}

function sameOwners(first: OwnerSegment[], second: OwnerSegment[]): boolean {
  return first.length === second.length && first.every((owner, at) => owner.kind === second[at]!.kind && owner.offset === second[at]!.offset);
}

function collect(node: PathNode, path: string[], position: number, found: PathNode[]): void {
  if (position === path.length) {
    if (node.lines.length > 0) found.push(node);
  } else {
    const segment = path[position]!;
    const literal = node.literal.get(segment);
    if (literal) collect(literal, path, position + 1, found);
    if (node.one && segment !== '') collect(node.one, path, position + 1, found);
  }
  // A template holds at most one '**', so below it every walk is linear.
  if (node.rest) for (let next = position; next <= path.length; next++) collect(node.rest, path, next, found);
}
