/**
 * A small Prometheus registry (text exposition format 0.0.4). Recording is a field increment on a
 * child resolved once per label set: label strings are built when a child is created, never per
 * observation, so hot paths keep their children (or arrays of them) and pay only the increment.
 */

export type MetricType = 'counter' | 'gauge' | 'histogram';

/** One sample of a metric read at scrape time: its label values (in labelNames order) and value. */
export type Sample = readonly [labelValues: readonly string[], value: number];

interface Rendered {
  readonly name: string;
  render(out: string[]): void;
}

/** One metric's exposition lines: `# HELP` and `# TYPE`, then its samples. */
export interface MetricFamily {
  name: string;
  lines: string[];
}

/**
 * The exposition text of several registries' families (cluster workers'): each metric's HELP and
 * TYPE once, followed by the samples of every source, as the format requires.
 */
export function renderFamilies(sources: readonly (readonly MetricFamily[])[]): string {
  const merged = new Map<string, string[]>();
  for (const families of sources) {
    for (const family of families) {
      const lines = merged.get(family.name);
      if (lines === undefined) merged.set(family.name, [...family.lines]);
      else for (let index = 2; index < family.lines.length; index++) lines.push(family.lines[index]!);
    }
  }
  const out: string[] = [];
  for (const lines of merged.values()) for (const line of lines) out.push(line);
  return `${out.join('\n')}\n`;
}

/** `\`, `"` and newlines are the characters a label value must escape. */
function escapeLabelValue(value: string): string {
  return /[\\"\n]/.test(value) ? value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n') : value;
}

function escapeHelp(help: string): string {
  return help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

export function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}

/** `name="value",…` for the given pairs ('' for none). */
function labelPairs(names: readonly string[], values: readonly string[]): string {
  let text = '';
  for (let index = 0; index < names.length; index++) {
    if (index > 0) text += ',';
    text += `${names[index]}="${escapeLabelValue(values[index] ?? '')}"`;
  }
  return text;
}

function braces(pairs: string): string {
  return pairs ? `{${pairs}}` : '';
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

abstract class Metric<Child> implements Rendered {
  private readonly children = new Map<string, Child>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: MetricType,
    readonly labelNames: readonly string[],
    /** Registry-wide labels (e.g. worker), already rendered as `name="value"` pairs. */
    protected readonly constantPairs: string,
  ) {
    if (!METRIC_NAME.test(name)) throw new Error(`invalid metric name: ${name}`);
    for (const label of labelNames) if (!LABEL_NAME.test(label) || label === 'le') throw new Error(`invalid label name: ${label}`);
  }

  /** The child for these label values (created on first use; keep it rather than asking per event). */
  labels(...values: string[]): Child {
    if (values.length !== this.labelNames.length) throw new Error(`${this.name} takes ${this.labelNames.length} label values, got ${values.length}`);
    const key = values.join('\u0000');
    let child = this.children.get(key);
    if (!child) {
      const own = labelPairs(this.labelNames, values);
      child = this.createChild(this.constantPairs && own ? `${this.constantPairs},${own}` : this.constantPairs || own);
      this.children.set(key, child);
    }
    return child;
  }

  render(out: string[]): void {
    out.push(`# HELP ${this.name} ${escapeHelp(this.help)}`, `# TYPE ${this.name} ${this.type}`);
    for (const child of this.children.values()) this.renderChild(child, out);
  }

  protected abstract createChild(pairs: string): Child;
  protected abstract renderChild(child: Child, out: string[]): void;
}

export class CounterChild {
  value = 0;
  constructor(readonly pairs: string) {}
  inc(amount = 1): void {
    this.value += amount;
  }
}

export class Counter extends Metric<CounterChild> {
  protected createChild(pairs: string): CounterChild {
    return new CounterChild(pairs);
  }
  protected renderChild(child: CounterChild, out: string[]): void {
    out.push(`${this.name}${braces(child.pairs)} ${formatValue(child.value)}`);
  }
}

export class GaugeChild {
  value = 0;
  constructor(readonly pairs: string) {}
  set(value: number): void {
    this.value = value;
  }
  inc(amount = 1): void {
    this.value += amount;
  }
  dec(amount = 1): void {
    this.value -= amount;
  }
}

export class Gauge extends Metric<GaugeChild> {
  protected createChild(pairs: string): GaugeChild {
    return new GaugeChild(pairs);
  }
  protected renderChild(child: GaugeChild, out: string[]): void {
    out.push(`${this.name}${braces(child.pairs)} ${formatValue(child.value)}`);
  }
}

export class HistogramChild {
  /** Observations per bucket (not cumulative; the last slot is above the highest bound). */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    readonly pairs: string,
    private readonly bounds: Float64Array,
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const bounds = this.bounds;
    let index = 0;
    while (index < bounds.length && value > bounds[index]!) index++;
    this.counts[index]!++;
    this.sum += value;
    this.count++;
  }
}

export class Histogram extends Metric<HistogramChild> {
  private readonly bounds: Float64Array;
  private readonly boundLabels: string[];

  constructor(name: string, help: string, labelNames: readonly string[], constantPairs: string, buckets: readonly number[]) {
    super(name, help, 'histogram', labelNames, constantPairs);
    for (let index = 1; index < buckets.length; index++) {
      if (!(buckets[index]! > buckets[index - 1]!)) throw new Error(`${name}: buckets must increase`);
    }
    this.bounds = Float64Array.from(buckets);
    this.boundLabels = buckets.map(formatValue);
  }

  protected createChild(pairs: string): HistogramChild {
    return new HistogramChild(pairs, this.bounds);
  }

  protected renderChild(child: HistogramChild, out: string[]): void {
    const prefix = child.pairs ? `${child.pairs},` : '';
    let cumulative = 0;
    for (let index = 0; index < this.boundLabels.length; index++) {
      cumulative += child.counts[index]!;
      out.push(`${this.name}_bucket{${prefix}le="${this.boundLabels[index]}"} ${formatValue(cumulative)}`);
    }
    out.push(`${this.name}_bucket{${prefix}le="+Inf"} ${formatValue(child.count)}`);
    out.push(`${this.name}_sum${braces(child.pairs)} ${formatValue(child.sum)}`);
    out.push(`${this.name}_count${braces(child.pairs)} ${formatValue(child.count)}`);
  }
}

/** A counter or gauge whose samples are read when scraped (values other objects already keep). */
class CollectedMetric implements Rendered {
  constructor(
    readonly name: string,
    private readonly help: string,
    private readonly type: 'counter' | 'gauge',
    private readonly labelNames: readonly string[],
    private readonly constantPairs: string,
    private readonly collect: () => Iterable<Sample>,
  ) {
    if (!METRIC_NAME.test(name)) throw new Error(`invalid metric name: ${name}`);
  }

  render(out: string[]): void {
    out.push(`# HELP ${this.name} ${escapeHelp(this.help)}`, `# TYPE ${this.name} ${this.type}`);
    for (const [values, value] of this.collect()) {
      const own = labelPairs(this.labelNames, values);
      const pairs = this.constantPairs && own ? `${this.constantPairs},${own}` : this.constantPairs || own;
      out.push(`${this.name}${braces(pairs)} ${formatValue(value)}`);
    }
  }
}

export const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export class MetricsRegistry {
  private readonly metrics: Rendered[] = [];
  private readonly names = new Set<string>();
  private readonly constantPairs: string;

  /** `constantLabels` go on every series (e.g. the cluster worker that answered the scrape). */
  constructor(constantLabels: Record<string, string> = {}) {
    this.constantPairs = labelPairs(Object.keys(constantLabels), Object.values(constantLabels));
  }

  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    return this.add(name, new Counter(name, help, 'counter', labelNames, this.constantPairs));
  }

  gauge(name: string, help: string, labelNames: readonly string[] = []): Gauge {
    return this.add(name, new Gauge(name, help, 'gauge', labelNames, this.constantPairs));
  }

  histogram(name: string, help: string, labelNames: readonly string[], buckets: readonly number[]): Histogram {
    return this.add(name, new Histogram(name, help, labelNames, this.constantPairs, buckets));
  }

  /** A counter or gauge read from elsewhere at scrape time. */
  collected(name: string, help: string, type: 'counter' | 'gauge', labelNames: readonly string[], collect: () => Iterable<Sample>): void {
    this.add(name, new CollectedMetric(name, help, type, labelNames, this.constantPairs, collect));
  }

  /** The exposition text of every metric, in registration order. */
  render(): string {
    return renderFamilies([this.families()]);
  }

  /** Every metric's lines now (what a cluster worker sends for a merged scrape). */
  families(): MetricFamily[] {
    return this.metrics.map((metric) => {
      const lines: string[] = [];
      metric.render(lines);
      return { name: metric.name, lines };
    });
  }

  private add<M extends Rendered>(name: string, metric: M): M {
    if (this.names.has(name)) throw new Error(`metric ${name} is already registered`);
    this.names.add(name);
    this.metrics.push(metric);
    return metric;
  }
}
