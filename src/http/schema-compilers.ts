import type { FastifySchemaCompiler, FastifySerializerCompiler } from 'fastify';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { TSchema } from 'typebox';
import { compileValidator } from './schemas.ts';

type Validator = ReturnType<FastifySchemaCompiler<TSchema>>;
type Serializer = (data: unknown) => string;

/**
 * The identity API's request validators and response serializers, each compiled once per schema.
 * An application compiles every route's schemas when it becomes ready (TypeBox's compiler for
 * requests, fast-json-stringify for responses): a few hundred milliseconds of code generation at each
 * start. A process that builds several applications (a test file) can hand them one SchemaCompilers
 * and compile each schema once. Request schemas are the route modules' constants, known by identity;
 * response schemas are mostly made per route (`one('domain', DomainEntity)`), so they are known by
 * their JSON, which is all fast-json-stringify reads of them.
 *
 * What a compilation depends on besides the schema is the same for every application: no shared
 * schemas (`addSchema`) and fastify's default serializer options (src/app.ts sets none).
 */
export class SchemaCompilers {
  readonly #validators = new WeakMap<object, Validator>();
  readonly #serializers = new Map<string, Serializer>();
  readonly #compileSerializer = SerializerSelector()({}, {});

  readonly validator: FastifySchemaCompiler<TSchema> = (route) => {
    let validator = this.#validators.get(route.schema);
    if (!validator) {
      validator = compileValidator(route);
      this.#validators.set(route.schema, validator);
    }
    return validator;
  };

  readonly serializer: FastifySerializerCompiler<TSchema> = (route) => {
    const key = JSON.stringify(route.schema);
    let serializer = this.#serializers.get(key);
    if (!serializer) {
      serializer = this.#compileSerializer({ ...route, httpStatus: route.httpStatus ?? '' });
      this.#serializers.set(key, serializer);
    }
    return serializer;
  };
}
