import { Type } from 'typebox';
import { NotFoundError, ValidationError } from '../../support/errors.ts';
import { authorize, type App, type IdentityApi } from '../context.ts';
import { GatewayExplainBody, GatewayExplanationBody } from '../schemas.ts';

const DecisionParams = Type.Object({ request_id: Type.String({ minLength: 1, maxLength: 64 }) });
const ReplayBody = Type.Object(
  {
    replay: Type.Object(
      {
        files: Type.Record(Type.String({ minLength: 1, maxLength: 255 }), Type.String({ maxLength: 1_048_576 })),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000_000 })),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);
/** Recorded decisions replayed when the request gives no limit. */
const DEFAULT_REPLAY_LIMIT = 10_000;

/**
 * POST /v3/gateway/policy/explain: how the gateway would decide a request, and by which rule.
 * GET /v3/gateway/decisions/{request_id}: how it did decide a proxied request (X-OpenStack-Request-Id).
 * POST /v3/gateway/policy/replay: how a candidate policy would have decided the recorded requests.
 */
export function registerGatewayPolicyRoutes(app: App, api: IdentityApi): void {
  app.post('/v3/gateway/policy/replay', { schema: { body: ReplayBody } }, async (request) => {
    authorize(api, request, 'identity:replay_gateway_policy');
    const { files, limit } = request.body.replay;
    return { replay: await api.gateway.replay({ files, limit: limit ?? DEFAULT_REPLAY_LIMIT }) };
  });

  app.get('/v3/gateway/decisions/:request_id', { schema: { params: DecisionParams } }, async (request) => {
    authorize(api, request, 'identity:get_gateway_decision');
    const decision = await api.gateway.decision(request.params.request_id);
    if (!decision) throw NotFoundError.of('gateway decision', request.params.request_id);
    return { decision };
  });

  app.post(
    '/v3/gateway/policy/explain',
    { schema: { body: GatewayExplainBody, response: { 200: GatewayExplanationBody } } },
    async (request) => {
      authorize(api, request, 'identity:explain_gateway_policy');
      const body = request.body.explain;
      if (body.token !== undefined && (body.roles !== undefined || body.scope !== undefined)) {
        throw new ValidationError('Give either a token or roles and scope, not both.');
      }
      if (body.token === undefined && (body.roles === undefined || body.scope === undefined)) {
        throw ValidationError.expecting('token, or roles and scope,', 'explain');
      }
      const explanation = await api.gateway.explain({
        method: body.method,
        path: body.path,
        ...(body.token !== undefined
          ? { token: body.token }
          : {
              subject: {
                roles: body.roles!,
                scope: body.scope!,
                ...(body.project_id !== undefined ? { projectId: body.project_id } : {}),
                userId: body.user_id ?? '',
              },
            }),
      });
      const { subject, ...decision } = explanation;
      return {
        explanation: {
          ...decision,
          subject: {
            roles: subject.roles,
            scope: subject.scope,
            ...(subject.projectId !== undefined ? { project_id: subject.projectId } : {}),
            user_id: subject.userId,
          },
        },
      };
    },
  );
}
