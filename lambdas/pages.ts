import { scopeDescription } from '../core/kernel/scopes';
import { PAGE_REFERRER_POLICY } from './http';

// Server-rendered pages: plain HTML forms, one stylesheet, no inline style or script (the CSP
// allows neither); the sign-in and account pages load our one script for passkeys
// (./passkeys-script.ts). Labels are part of the contract (design brief §5): "Number or email",
// "Password", "Sign in", "Allow", "Deny", "Sign in with a passkey", "Add a passkey".

export const escapeHtml = (value: string) => value.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);

export interface Link {
  href: string;
  text: string;
}

const scopeList = (scopes: string[]) => scopes.map((scope) => escapeHtml(scopeDescription(scope))).join('; ');
const scopeItems = (scopes: string[]) =>
  scopes.map((scope) => `<li>${escapeHtml(scopeDescription(scope))}</li>`).join('\n');
/** A date as one unbreakable unit (a narrow card must not wrap it mid-date). */
const day = (epochMs: number) => {
  const iso = new Date(epochMs).toISOString().slice(0, 10);
  return `<time datetime="${iso}">${iso}</time>`;
};
const anchor = (link: Link) => `<a href="${escapeHtml(link.href)}">${escapeHtml(link.text)}</a>`;
const links = (items: Link[]) => (items.length === 0 ? '' : `\n<p class="links">${items.map(anchor).join(' · ')}</p>`);

/** The page frame; `wide` for pages that show data (the local demo client); `script`: passkeys. */
export function layout(title: string, content: string, options: { wide?: boolean; script?: boolean } = {}): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="${PAGE_REFERRER_POLICY}">
<title>${escapeHtml(title)}</title>
<link rel="stylesheet" href="/assets/style.css">
<link rel="icon" href="/assets/favicon.svg" type="image/svg+xml">${
    options.script ? '\n<script src="/assets/passkeys.js" defer></script>' : ''
  }
</head>
<body>
<main${options.wide ? ' class="wide"' : ''}>
${content}
</main>
</body>
</html>`;
}

/** Where the script says a passkey did not work (hidden until then). */
const passkeyAlert = '<p class="error" role="alert" id="passkey-error" hidden></p>';

const hidden = (name: string, value: string | undefined) =>
  value === undefined ? '' : `<input type="hidden" name="${name}" value="${escapeHtml(value)}">`;

export function signInPage(input: {
  requestId?: string;
  csrf: string;
  clientName?: string;
  error?: string;
  identifier?: string;
}): string {
  const intro = input.clientName
    ? `<p>Sign in to continue to <strong>${escapeHtml(input.clientName)}</strong>.</p>`
    : '<p>Sign in to manage your account.</p>';
  const error = input.error ? `<p class="error" role="alert" id="sign-in-error">${escapeHtml(input.error)}</p>` : '';
  const described = input.error ? ' aria-describedby="sign-in-error"' : '';
  return layout(
    'Sign in',
    `<h1>Sign in</h1>
${intro}
${error}
<form method="post" action="/login">
${hidden('request', input.requestId)}${hidden('csrf', input.csrf)}${hidden('passkey', '')}
<label for="identifier">Number or email</label>
<input id="identifier" name="identifier" type="text" autocomplete="username webauthn" required maxlength="254"
 value="${escapeHtml(input.identifier ?? '')}"${described}>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required
 maxlength="256"${described}>
<button type="submit">Sign in</button>
</form>
<p class="or">or</p>
<button type="button" id="passkey-sign-in" class="secondary">Sign in with a passkey</button>
${passkeyAlert}`,
    { script: true },
  );
}

export function consentPage(input: {
  requestId: string;
  csrf: string;
  clientName: string;
  scopes: string[];
  /** The account as the person named it at sign-in: their email or their number. */
  signedInAs: string;
}): string {
  const items = scopeItems(input.scopes);
  const again = `/login?request=${encodeURIComponent(input.requestId)}`;
  return layout(
    `Allow ${input.clientName}?`,
    `<h1>Allow <strong>${escapeHtml(input.clientName)}</strong> to use your account?</h1>
<p>Signed in as <strong>${escapeHtml(input.signedInAs)}</strong>.
Not you? <a href="${escapeHtml(again)}">Sign in as someone else</a></p>
<p><strong>${escapeHtml(input.clientName)}</strong> asks to:</p>
<ul>
${items}
</ul>
<form method="post" action="/consent">
${hidden('request', input.requestId)}${hidden('csrf', input.csrf)}
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny" class="secondary">Deny</button>
</form>
<p class="note">You can take this back at any time on your account page.</p>`,
  );
}

export interface ConnectedApp {
  clientId: string;
  name: string;
  scopes: string[];
  grantedAt: number;
}

export interface PasskeyView {
  credentialId: string;
  name: string;
  createdAt: number;
  lastUsedAt?: number;
  /** Backed up (BS): synced to the person's other devices by their passkey provider. */
  synced: boolean;
}

const passkeyItem = (passkey: PasskeyView) => {
  const id = encodeURIComponent(passkey.credentialId);
  const name = escapeHtml(passkey.name);
  return `<li>
<h3>${name}</h3>
<p>Added on ${day(passkey.createdAt)}.
${passkey.lastUsedAt ? `Last used on ${day(passkey.lastUsedAt)}.` : 'Not used yet.'}
${passkey.synced ? 'Synced to your other devices.' : 'On this device only.'}</p>
<a class="button secondary" href="/account/passkeys/rename?id=${id}" aria-label="Rename ${name}">Rename</a>
<a class="button danger secondary" href="/account/passkeys/remove?id=${id}" aria-label="Remove ${name}">Remove</a>
</li>`;
};

/** The passkeys section of /account: the list, and "Add a passkey" (a recent sign-in, else the password first). */
function passkeySection(input: { csrf: string; passkeys: PasskeyView[]; canAdd: boolean }) {
  const list =
    input.passkeys.length === 0
      ? '<p>No passkeys yet: sign in with your fingerprint, face or screen lock instead of a password.</p>'
      : `<ul class="apps">\n${input.passkeys.map(passkeyItem).join('\n')}\n</ul>`;
  const add = input.canAdd
    ? `<form method="post" action="/account/passkeys">
${hidden('csrf', input.csrf)}${hidden('credential', '')}
<button type="submit">Add a passkey</button>
</form>
${passkeyAlert}`
    : `<form method="get" action="/account/passkeys/confirm">
<button type="submit">Add a passkey</button>
</form>`;
  return `<h2>Passkeys</h2>\n${list}\n${add}`;
}

export function accountPage(input: {
  svcnum: string;
  email?: string;
  csrf: string;
  apps: ConnectedApp[];
  /** The name of an application whose access was just removed: confirmed at the top. */
  removed?: string;
  passkeys: PasskeyView[];
  canAddPasskey: boolean;
  /** What just happened to a passkey, confirmed at the top. */
  notice?: string;
}): string {
  const removed = input.removed
    ? `<p class="notice" role="status">Access removed for <strong>${escapeHtml(input.removed)}</strong>.</p>\n`
    : input.notice
      ? `<p class="notice" role="status">${escapeHtml(input.notice)}</p>\n`
      : '';
  const apps =
    input.apps.length === 0
      ? '<p>No applications are connected to your account.</p>'
      : `<ul class="apps">
${input.apps
  .map(
    (app) => `<li>
<h3>${escapeHtml(app.name)}</h3>
<p>Allowed on ${day(app.grantedAt)}. It can:</p>
<ul class="scopes">
${scopeItems(app.scopes)}
</ul>
<a class="button danger secondary" href="/account/revoke?client_id=${encodeURIComponent(app.clientId)}"
 aria-label="Revoke access for ${escapeHtml(app.name)}">Revoke access</a>
</li>`,
  )
  .join('\n')}
</ul>`;
  return layout(
    'Your account',
    `<h1>Your account</h1>
${removed}<p>Number: <strong>${escapeHtml(input.svcnum)}</strong>
${input.email ? `<br>Email: ${escapeHtml(input.email)}` : ''}</p>
<h2>Connected applications</h2>
${apps}
${passkeySection({ csrf: input.csrf, passkeys: input.passkeys, canAdd: input.canAddPasskey })}
<form method="post" action="/logout">
${hidden('csrf', input.csrf)}
<button type="submit" class="secondary">Sign out</button>
</form>`,
    { script: input.canAddPasskey },
  );
}

/** "Add a passkey" after a sign-in over 5 minutes old: the password first. */
export function confirmPasswordPage(input: { csrf: string; error?: string }): string {
  const error = input.error ? `<p class="error" role="alert" id="confirm-error">${escapeHtml(input.error)}</p>` : '';
  const described = input.error ? ' aria-describedby="confirm-error"' : '';
  return layout(
    'Confirm it is you',
    `<h1>Confirm it is you</h1>
<p>Enter your password to add a passkey.</p>
${error}
<form method="post" action="/account/passkeys/confirm">
${hidden('csrf', input.csrf)}
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required
 maxlength="256"${described}>
<button type="submit">Continue</button>
<a class="button secondary" href="/account">Cancel</a>
</form>`,
  );
}

export function renamePasskeyPage(input: { csrf: string; passkey: PasskeyView }): string {
  return layout(
    `Rename ${input.passkey.name}`,
    `<h1>Rename <strong>${escapeHtml(input.passkey.name)}</strong></h1>
<form method="post" action="/account/passkeys/rename">
${hidden('csrf', input.csrf)}${hidden('id', input.passkey.credentialId)}
<label for="name">Passkey name</label>
<input id="name" name="name" type="text" required maxlength="60" value="${escapeHtml(input.passkey.name)}">
<button type="submit">Save</button>
<a class="button secondary" href="/account">Cancel</a>
</form>`,
  );
}

export function removePasskeyPage(input: { csrf: string; passkey: PasskeyView }): string {
  const name = escapeHtml(input.passkey.name);
  return layout(
    `Remove ${input.passkey.name}?`,
    `<h1>Remove <strong>${name}</strong>?</h1>
<p>You will no longer be able to sign in with this passkey. Your password and other passkeys keep working.
Your device may still offer it: remove it there too.</p>
<form method="post" action="/account/passkeys/remove">
${hidden('csrf', input.csrf)}${hidden('id', input.passkey.credentialId)}
<button type="submit" class="danger">Remove</button>
<a class="button secondary" href="/account">Cancel</a>
</form>`,
  );
}

/** The step between "Revoke access" on /account and the revocation: a page, so no script is needed. */
export function revokePage(input: { csrf: string; app: ConnectedApp }): string {
  const name = escapeHtml(input.app.name);
  return layout(
    `Revoke access for ${input.app.name}?`,
    `<h1>Revoke access for <strong>${name}</strong>?</h1>
<p><strong>${name}</strong> will no longer be able to: ${scopeList(input.app.scopes)}.
It can no longer renew its access (an access token it already holds ends within the hour).
If you use it again, it will ask for your permission.</p>
<form method="post" action="/account/revoke">
${hidden('csrf', input.csrf)}${hidden('client_id', input.app.clientId)}
<button type="submit" class="danger">Revoke access</button>
<a class="button secondary" href="/account">Cancel</a>
</form>`,
  );
}

/**
 * RP-Initiated Logout's question, when the request does not show it comes from the signed-in person's
 * application (no ID token, or another person's): "Sign out", or stay.
 */
export function signOutPage(input: {
  csrf: string;
  /** The application that asked, and where the browser goes back to afterwards. */
  clientName?: string;
  clientId?: string;
  postLogoutRedirectUri?: string;
  state?: string;
  signedInAs: string;
}): string {
  const name = input.clientName ? escapeHtml(input.clientName) : undefined;
  const fields =
    hidden('csrf', input.csrf) +
    hidden('client_id', input.clientId) +
    hidden('post_logout_redirect_uri', input.postLogoutRedirectUri) +
    hidden('state', input.state);
  return layout(
    `Sign out of ${input.clientName ?? 'your account'}?`,
    `<h1>Sign out of ${name ? `<strong>${name}</strong>` : 'your account'}?</h1>
<p>${name ? `<strong>${name}</strong> asks to sign you out. ` : ''}Signed in as
<strong>${escapeHtml(input.signedInAs)}</strong>: signing out ends your sign-in here, for every application
that uses it in this browser.</p>
<form method="post" action="/logout">
${fields}
<button type="submit">Sign out</button>
<a class="button secondary" href="/account">Stay signed in</a>
</form>`,
  );
}

export function messagePage(title: string, message: string, onward: Link[] = [], hint?: string): string {
  return layout(
    title,
    `<h1>${escapeHtml(title)}</h1>
<p>${escapeHtml(message)}</p>${hint ? `\n<p>${escapeHtml(hint)}</p>` : ''}${links(onward)}`,
  );
}

/** The pages' icon: a small SVG, so it is text (no binary media type at API Gateway). */
export const favicon = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">
<rect width="32" height="32" rx="6" fill="#0b57d0"/>
<path d="M9 17l5 5 9-11" fill="none" stroke="#fff" stroke-width="3.5" stroke-linecap="round" stroke-linejoin="round"/>
</svg>
`;

export const stylesheet = `
body { font-family: system-ui, sans-serif; background: #f5f6f8; color: #1b1d21; margin: 0; }
main {
  max-width: 28rem; margin: 3rem auto; background: #fff; padding: 2rem; border-radius: 8px;
  box-shadow: 0 1px 4px rgba(0,0,0,.12);
}
h1 { font-size: 1.4rem; margin-top: 0; }
h2 { font-size: 1.15rem; }
h3 { font-size: 1rem; margin-bottom: .25rem; }
@media (max-width: 30rem) {
  main { margin: 1rem .75rem; padding: 1.25rem; }
}
label { display: block; margin: 1rem 0 .25rem; font-weight: 600; }
input[type=text], input[type=password] {
  width: 100%; box-sizing: border-box; padding: .6rem; font: inherit; font-size: 1rem;
  border: 1px solid #8a8f98; border-radius: 4px;
}
main.wide { max-width: 48rem; }
a { color: #0b57d0; }
button, a.button {
  display: inline-block; margin-top: 1.25rem; margin-right: .5rem; padding: .6rem 1.2rem;
  font: inherit; font-size: 1rem; line-height: 1.2; text-decoration: none; border-radius: 4px;
  border: 1px solid #0b57d0; background: #0b57d0; color: #fff; cursor: pointer;
}
/* Element-qualified, so they win over the base rule for a link styled as a button. */
button.secondary, a.button.secondary { background: #fff; color: #0b57d0; }
button.danger, a.button.danger { background: #a50e0e; border-color: #a50e0e; color: #fff; }
button.danger.secondary, a.button.danger.secondary { background: #fff; color: #a50e0e; }
time { white-space: nowrap; }
.notice { background: #e6f4ea; color: #0d652d; padding: .6rem; border-radius: 4px; }
ul.apps .button { margin-top: 0; padding: .35rem .8rem; font-size: .9rem; }
p.or { margin: 1rem 0 0; color: #50545c; }
p.or + button { margin-top: .5rem; }
/* Dark blue on the white card and the grey page: over 6:1 (WCAG 1.4.11 asks 3:1). */
button:focus-visible, input:focus-visible, a:focus-visible, pre:focus-visible {
  outline: 3px solid #0b57d0; outline-offset: 2px;
}
pre { overflow-x: auto; background: #f5f6f8; padding: .6rem; border-radius: 4px; }
.error { color: #a50e0e; background: #fce8e6; padding: .6rem; border-radius: 4px; }
.note { color: #50545c; font-size: .9rem; }
ul.apps { list-style: none; padding: 0; }
ul.apps > li { border-top: 1px solid #e0e2e6; padding: .5rem 0; }
`;
