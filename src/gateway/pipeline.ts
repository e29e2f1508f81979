/**
 * A step's answer: the value itself when it was at hand (a cache hit), a promise of it when the
 * step had to wait (a token to validate, an endpoint table or a catalog to read).
 */
export type Step<T> = T | Promise<T>;

/**
 * Continues with `next(state, value)`: in the same turn when `value` is at hand, once it settles
 * otherwise. The one place the gateway tells the two cases apart, so each stage is written once and a
 * request whose every answer is cached takes no promise hop. `state` is passed through rather than
 * captured, so the synchronous path allocates no closure. A rejection (or a throw in `next`) comes
 * out as the returned promise's rejection, or is thrown, as the case may be.
 */
export function then<S, T, U>(value: Step<T>, state: S, next: (state: S, value: T) => Step<U>): Step<U> {
  if (value instanceof Promise) return value.then((settled: T) => next(state, settled));
  return next(state, value);
}

/**
 * One stage of a request's passage: it looks at what earlier stages found, records what it finds,
 * and answers undefined to let the request go on, or an ending (`E`) to stop it there.
 */
export type Stage<S, E> = (subject: S) => Step<E | undefined>;

/**
 * Runs `stages` in order until one answers an ending (which is returned) or all have let the request
 * through (undefined). Synchronous for as long as the stages answer at once (see then()).
 */
export function runStages<S, E>(stages: readonly Stage<S, E>[], subject: S, from = 0): Step<E | undefined> {
  for (let index = from; index < stages.length; index++) {
    const ending = stages[index]!(subject);
    if (ending instanceof Promise) return then(ending, subject, (rest: S, settled: E | undefined) => settled ?? runStages(stages, rest, index + 1));
    if (ending !== undefined) return ending;
  }
  return undefined;
}
