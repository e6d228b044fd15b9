import { createDynamoAccountsStore } from '../core/adapters/dynamo-accounts-store';
import { createDynamoDpopStore } from '../core/adapters/dynamo-dpop-store';
import { createDynamoMessagingStore } from '../core/adapters/dynamo-messaging-store';
import { dynamoStore } from '../core/adapters/dynamo-store';
import { invalidArgument } from '../core/kernel/errors';
import { httpsIssuer } from '../core/kernel/config';
import { authenticationModule, messagingModule, oauthModule, type Modules } from '../core/registry';
import { edgeHandler } from './edge';
import { header, json, MAX_BODY_BYTES, presentedAccess, rawBody, type HttpEvent, type HttpResult } from './http';
import { lambdaHandler } from './runtime';

// POST /api/messages: the Messaging External API's ingress. A Bearer token with the `messaging`
// scope sends a message; it is stored in the recipient's inbox before the answer (202).

/** The HTTP edge's own refusals of a body it cannot take (415, 413): protocol, not domain. */
const unacceptable = (status: 413 | 415, description: string) =>
  json(status, { error: 'invalid_request', error_description: description });

/** The modules this group's routes use: oauth and authentication for the Bearer or DPoP token, messaging to send. */
export const messagesModules = [oauthModule, authenticationModule, messagingModule] as const;

export function createMessagesHandler({
  oauth,
  authentication,
  messaging,
}: Pick<Modules, 'oauth' | 'authentication' | 'messaging'>) {
  async function send(event: HttpEvent): Promise<HttpResult> {
    const claims = await authentication.authenticate(presentedAccess(event, oauth.config.issuer));
    const contentType = (header(event, 'content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (contentType !== 'application/json') return unacceptable(415, 'the body must be application/json');
    const body = rawBody(event);
    if (Buffer.byteLength(body) > MAX_BODY_BYTES) return unacceptable(413, 'the request body is too large');
    let input: unknown;
    try {
      input = JSON.parse(body);
    } catch {
      throw invalidArgument('the body is not valid JSON');
    }
    if (!input || typeof input !== 'object' || Array.isArray(input))
      throw invalidArgument('the body must be a JSON object: { "to", "text", "from"? }');
    const { to, text, from } = input as Record<string, unknown>;
    if (from !== undefined && typeof from !== 'string') throw invalidArgument('from must be a string');
    const sender = await messaging.sender(claims, from);
    const accepted = await messaging.send(sender, { to, text });
    const accepted_at = new Date(accepted.acceptedAt).toISOString();
    const answer = { message_id: accepted.messageId, from: accepted.from, to: accepted.to, accepted_at };
    return json(202, answer);
  }
  return edgeHandler({ '/api/messages': { POST: send } }, { realm: 'messaging', secure: httpsIssuer(oauth.config) });
}

export const handler = lambdaHandler(messagesModules, createMessagesHandler, {
  store: dynamoStore(createDynamoAccountsStore, createDynamoMessagingStore, createDynamoDpopStore),
});
