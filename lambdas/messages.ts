import { MessagingError } from '../core/messaging/send';
import type { Core } from '../core/service';
import { bearerToken, InvalidTokenError, presentsBearer } from '../core/tokens';
import { edgeHandler } from './edge';
import { bearerChallengeOnly, header, json, MAX_BODY_BYTES, rawBody, type HttpEvent, type HttpResult } from './http';
import { lazyHandler } from './runtime';

// POST /api/messages: the Messaging External API's ingress. A Bearer token with the `messaging`
// scope sends a message; it is stored in the recipient's inbox before the answer (202).

/** RFC 6750 §3: the error code in the challenge, and for insufficient_scope the scope needed. */
const bearerChallenge = (error: string) =>
  `Bearer realm="messaging", error="${error}"${error === 'insufficient_scope' ? ', scope="messaging"' : ''}`;

function refused(status: number, error: string, description: string, challenge = false): HttpResult {
  return json(status, { error, error_description: description }, challenge ? { 'WWW-Authenticate': bearerChallenge(error) } : {});
}

export function createMessagesHandler(core: Core) {
  async function send(event: HttpEvent): Promise<HttpResult> {
    const authorization = header(event, 'authorization');
    if (!presentsBearer(authorization)) return bearerChallengeOnly('messaging');
    const token = bearerToken(authorization);
    if (!token) return refused(401, 'invalid_token', 'the Authorization header must be: Bearer <access token>', true);
    let claims;
    try {
      claims = await core.verifyAccessToken(token);
    } catch (error) {
      if (error instanceof InvalidTokenError) return refused(401, 'invalid_token', error.message, true);
      throw error;
    }
    const contentType = (header(event, 'content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (contentType !== 'application/json') return refused(415, 'invalid_request', 'the body must be application/json');
    const body = rawBody(event);
    if (Buffer.byteLength(body) > MAX_BODY_BYTES) return refused(413, 'invalid_request', 'the request body is too large');
    let input: unknown;
    try {
      input = JSON.parse(body);
    } catch {
      return refused(400, 'invalid_request', 'the body is not valid JSON');
    }
    if (!input || typeof input !== 'object' || Array.isArray(input)) return refused(400, 'invalid_request', 'the body must be a JSON object: { "to", "text", "from"? }');
    const { to, text, from } = input as Record<string, unknown>;
    if (from !== undefined && typeof from !== 'string') return refused(400, 'invalid_request', 'from must be a string');
    try {
      const sender = await core.messaging.sender(claims, from as string | undefined);
      const accepted = await core.messaging.send(sender, { to, text });
      return json(202, { message_id: accepted.messageId, from: accepted.from, to: accepted.to, accepted_at: new Date(accepted.acceptedAt).toISOString() });
    } catch (error) {
      if (error instanceof MessagingError) return refused(error.status, error.error, error.message, error.status === 401 || error.error === 'insufficient_scope');
      throw error;
    }
  }
  return edgeHandler({ '/api/messages': { POST: send } });
}

export const handler = lazyHandler(createMessagesHandler);
