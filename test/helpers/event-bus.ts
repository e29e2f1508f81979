import type { ClusterMessage, EventBus } from '../../src/events/event-bus.ts';

/** An event bus whose connection the test sets and whose messages it reads and delivers by hand. */
export class FakeBus implements EventBus {
  connected = true;
  linksNodes = true;
  published: ClusterMessage[] = [];
  handlers: Parameters<EventBus['subscribe']>[0] | undefined;
  publish(message: ClusterMessage): void {
    this.published.push(message);
  }
  subscribe(handlers: Parameters<EventBus['subscribe']>[0]): void {
    this.handlers = handlers;
  }
  async close(): Promise<void> {}
}
