import type { ProgrammableNumberView } from '../../core/provisioning/programmable';
import type { Modules } from '../../core/registry';
import {
  MessageKind,
  type IncomingMessage,
  type NumberServiceServer,
  type ProgrammableNumber,
} from '../gen/svcnum/provisioning/v1alpha1/number_service';
import { EntityType } from '../gen/svcnum/provisioning/v1alpha1/common';
import type { MessageKind as CoreMessageKind, SenderEntityType, StoredMessage } from '../../core/messaging/store';
import { invalidArgument } from '../../core/kernel/errors';
import { serverStream, unary } from '../calls';
import { numberState, timestamp } from './convert';

const toProto = (number: ProgrammableNumberView): ProgrammableNumber => ({
  svcnumId: number.svcnumId,
  svcnum: number.svcnum,
  displayName: number.displayName,
  state: numberState(number.state),
  config: { autoReply: number.config.autoReply, forwardToSvcnumId: number.config.forwardToSvcnumId },
  createTime: timestamp(number.createTime),
  updateTime: timestamp(number.updateTime),
});

const SENDER_TYPES: Record<SenderEntityType, EntityType> = {
  person: EntityType.ENTITY_TYPE_PERSON,
  business: EntityType.ENTITY_TYPE_BUSINESS,
  programmable: EntityType.ENTITY_TYPE_PROGRAMMABLE,
  ai_agent: EntityType.ENTITY_TYPE_AI_AGENT,
  mask: EntityType.ENTITY_TYPE_MASK,
};

const KINDS: Record<CoreMessageKind, MessageKind> = {
  message: MessageKind.MESSAGE_KIND_MESSAGE,
  auto_reply: MessageKind.MESSAGE_KIND_AUTO_REPLY,
  forward: MessageKind.MESSAGE_KIND_FORWARD,
};

const incoming = (message: StoredMessage, cursor: string): IncomingMessage => ({
  messageId: message.messageId,
  cursor,
  toSvcnumId: message.inboxId,
  toSvcnum: message.toSvcnum,
  fromSvcnum: message.fromSvcnum,
  senderEntityType: SENDER_TYPES[message.senderEntityType],
  kind: KINDS[message.kind],
  text: message.text,
  createTime: timestamp(message.acceptedAt),
  forwardedBy: message.forwardedBy ?? '',
});

/** `closing` aborts when the server drains: open streams end, clients resume elsewhere with their cursor. */
export function numberService(
  { provisioning, messaging }: Pick<Modules, 'provisioning' | 'messaging'>,
  closing: AbortSignal = new AbortController().signal,
): NumberServiceServer {
  const { numbers } = provisioning;
  return {
    provisionNumber: unary(async (caller, request) =>
      toProto(
        await numbers.provision(caller, {
          requestId: request.requestId,
          displayName: request.displayName,
          ...(request.config ? { config: request.config } : {}),
        }),
      ),
    ),
    getNumber: unary(async (caller, request) => toProto(await numbers.get(caller, request.svcnumId))),
    listNumbers: unary(async (caller, request) => {
      const page = await numbers.list(caller, { pageSize: request.pageSize, pageToken: request.pageToken });
      return { numbers: page.items.map(toProto), nextPageToken: page.nextPageToken };
    }),
    streamAllMessages: serverStream(closing, async (caller, request, send, signal, recheck) => {
      let listed = false;
      const deliveries = messaging.stream(
        {
          ownerId: caller.ownerId,
          // Each re-list first checks the caller again (an expired token, a disabled client or
          // account ends the stream with its refusal), so a stream lasts no longer than its access.
          listInboxes: async () => {
            if (listed) await recheck();
            listed = true;
            return numbers.allIds(caller);
          },
          holdsInbox: (inboxId) => numbers.holds(caller, inboxId),
        },
        request.resumeCursor,
        signal,
      );
      for await (const { message, cursor } of deliveries) await send(incoming(message, cursor));
    }),
    configureProgrammable: unary(async (caller, request) => {
      if (!request.config) throw invalidArgument('config is required');
      return toProto(
        await numbers.configure(caller, {
          svcnumId: request.svcnumId,
          config: request.config,
          updatePaths: request.updateMask ?? [],
        }),
      );
    }),
  };
}
