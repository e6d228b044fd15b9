// The streams of incoming messages live in three rooms: the hub that learns which inboxes changed
// (hub.ts, its polls in hub-polling.ts), the resume cursors (cursors.ts), and the stream that
// follows an owner's inboxes (follow.ts). Here: the names that code outside core/messaging (the
// runtime configuration, the runner, benches and tests) imports of them, at one stable address.

export {
  DEFAULT_HUB_POLLING, ENGINE_CHECK_INTERVAL_MS, ENGINE_LOST_POLL_INTERVAL_MS, INBOX_REFRESH_MS, POLL_INTERVAL_MS,
  RELIST_SAFETY_POLLS, SAFETY_POLL_INTERVAL_MS, type HubPolling,
} from './hub-polling';
export { createMessageHub, type MessageHub } from './hub';
export {
  CURSOR_MAX_INBOXES, messageCursors, resumePoint,
  type InboxProgress, type MessageCursors, type Positions, type ResumePoint,
} from './cursors';
export { followInboxes, GAP_GRACE_MS, type Delivery } from './follow';
