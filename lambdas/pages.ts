import { scopeDescription } from '../core/scopes';

// Server-rendered pages: plain HTML forms, no script, one stylesheet. Labels are part of the
// contract (design brief §5): "Number or email", "Password", "Sign in", "Allow", "Deny".

const escapeHtml = (value: string) => value.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);

function layout(title: string, content: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(title)}</title>
<link rel="stylesheet" href="/assets/style.css">
</head>
<body>
<main>
${content}
</main>
</body>
</html>`;
}

const hidden = (name: string, value: string | undefined) =>
  value === undefined ? '' : `<input type="hidden" name="${name}" value="${escapeHtml(value)}">`;

export function signInPage(input: { requestId?: string; csrf: string; clientName?: string; error?: string; identifier?: string }): string {
  const intro = input.clientName
    ? `<p>Sign in to continue to <strong>${escapeHtml(input.clientName)}</strong>.</p>`
    : '<p>Sign in to manage your account.</p>';
  const error = input.error ? `<p class="error" role="alert" id="sign-in-error">${escapeHtml(input.error)}</p>` : '';
  const described = input.error ? ' aria-describedby="sign-in-error"' : '';
  return layout('Sign in', `<h1>Sign in</h1>
${intro}
${error}
<form method="post" action="/login">
${hidden('request', input.requestId)}${hidden('csrf', input.csrf)}
<label for="identifier">Number or email</label>
<input id="identifier" name="identifier" type="text" autocomplete="username" required maxlength="254" value="${escapeHtml(input.identifier ?? '')}"${described}>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="256"${described}>
<button type="submit">Sign in</button>
</form>`);
}

export function consentPage(input: { requestId: string; csrf: string; clientName: string; scopes: string[]; svcnum: string }): string {
  const items = input.scopes.map((scope) => `<li>${escapeHtml(scopeDescription(scope))}</li>`).join('\n');
  return layout(`Allow ${input.clientName}?`, `<h1>Allow <strong>${escapeHtml(input.clientName)}</strong> to use your account?</h1>
<p>You are signed in as ${escapeHtml(input.svcnum)}. <strong>${escapeHtml(input.clientName)}</strong> asks to:</p>
<ul>
${items}
</ul>
<form method="post" action="/consent">
${hidden('request', input.requestId)}${hidden('csrf', input.csrf)}
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny" class="secondary">Deny</button>
</form>
<p class="note">You can take this back at any time on your account page.</p>`);
}

export interface ConnectedApp { clientId: string; name: string; scopes: string[]; grantedAt: number }

export function accountPage(input: { svcnum: string; email?: string; csrf: string; apps: ConnectedApp[] }): string {
  const apps = input.apps.length === 0
    ? '<p>No applications are connected to your account.</p>'
    : `<ul class="apps">
${input.apps.map((app) => `<li>
<h3>${escapeHtml(app.name)}</h3>
<p>Can: ${app.scopes.map((scope) => escapeHtml(scopeDescription(scope))).join('; ')}. Allowed on ${new Date(app.grantedAt).toISOString().slice(0, 10)}.</p>
<form method="post" action="/account/revoke">
${hidden('csrf', input.csrf)}${hidden('client_id', app.clientId)}
<button type="submit" aria-label="Revoke access for ${escapeHtml(app.name)}">Revoke access</button>
</form>
</li>`).join('\n')}
</ul>`;
  return layout('Your account', `<h1>Your account</h1>
<p>Number: <strong>${escapeHtml(input.svcnum)}</strong>${input.email ? `<br>Email: ${escapeHtml(input.email)}` : ''}</p>
<h2>Connected applications</h2>
${apps}
<form method="post" action="/logout">
${hidden('csrf', input.csrf)}
<button type="submit" class="secondary">Sign out</button>
</form>`);
}

export function messagePage(title: string, message: string): string {
  return layout(title, `<h1>${escapeHtml(title)}</h1>
<p>${escapeHtml(message)}</p>`);
}

export const stylesheet = `
body { font-family: system-ui, sans-serif; background: #f5f6f8; color: #1b1d21; margin: 0; }
main { max-width: 28rem; margin: 3rem auto; background: #fff; padding: 2rem; border-radius: 8px; box-shadow: 0 1px 4px rgba(0,0,0,.12); }
h1 { font-size: 1.4rem; margin-top: 0; }
label { display: block; margin: 1rem 0 .25rem; font-weight: 600; }
input[type=text], input[type=password] { width: 100%; box-sizing: border-box; padding: .6rem; font-size: 1rem; border: 1px solid #8a8f98; border-radius: 4px; }
button { margin-top: 1.25rem; margin-right: .5rem; padding: .6rem 1.2rem; font-size: 1rem; border-radius: 4px; border: 1px solid #0b57d0; background: #0b57d0; color: #fff; cursor: pointer; }
button.secondary { background: #fff; color: #0b57d0; }
button:focus-visible, input:focus-visible { outline: 3px solid #f4b400; outline-offset: 2px; }
.error { color: #a50e0e; background: #fce8e6; padding: .6rem; border-radius: 4px; }
.note { color: #50545c; font-size: .9rem; }
ul.apps { list-style: none; padding: 0; }
ul.apps li { border-top: 1px solid #e0e2e6; padding: .5rem 0; }
`;
