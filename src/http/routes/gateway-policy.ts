import { ValidationError } from '../../support/errors.ts';
import { authorize, type App, type IdentityApi } from '../context.ts';
import { GatewayExplainBody, GatewayExplanationBody } from '../schemas.ts';

/** POST /v3/gateway/policy/explain: how the gateway would decide a request, and by which rule. */
export function registerGatewayPolicyRoutes(app: App, api: IdentityApi): void {
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
