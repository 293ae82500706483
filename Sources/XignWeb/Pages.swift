/// The pages, as Mustache templates: the same for everyone, so nothing personal is rendered on the server. Every
/// value is escaped by `{{…}}`; texts from the manager are set by the script with `textContent`.
enum Pages {
    static let templates: [String: String] = [
        "head": head, "notices": notices, "foot": foot, "personalize": personalize, "approve": approve,
        "account": account,
    ]

    /// What the script says: the status and, for screen readers at once, the error.
    static let notices = """
        <p id="status" role="status" aria-live="polite"></p>
        <p id="error" class="error" role="alert"></p>

        """

    static let foot = """
        <noscript><p class="error">Passkeys need JavaScript; allow it for this page.</p></noscript>
        </main>
        </body>
        </html>
        """

    static let head = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="no-referrer">
        <link rel="stylesheet" href="{{stylesheet}}">
        <script src="{{script}}" defer></script>

        """

    static let personalize = """
        {{> head}}
        <title>Activate XignIn in this browser</title>
        </head>
        <body data-page="personalize" data-rp-id="{{rpId}}" data-origin="{{origin}}">
        <main>
        <h1>Activate XignIn in this browser</h1>
        {{> notices}}
        <p>This makes a passkey for your account at <strong>{{origin}}</strong>. With it and your PIN you approve logins to servers.</p>
        <form id="pin-step">
        <label for="pin">Activation PIN</label>
        <input id="pin" name="pin" type="password" inputmode="numeric" autocomplete="off" maxlength="64" required>
        <button type="submit">Continue</button>
        </form>
        <section id="passkey-step" hidden>
        <h2 id="account"></h2>
        <p id="outcome"></p>
        <button id="create" type="button">Create passkey</button>
        </section>
        <section id="done" hidden>
        <h2>This browser is an XignIn device</h2>
        <p id="done-text"></p>
        <p><a href="/account">Your account: logins waiting for you, your devices, your PIN</a></p>
        </section>
        {{> foot}}
        """

    static let approve = """
        {{> head}}
        <title>Approve a login</title>
        </head>
        <body data-page="approve" data-rp-id="{{rpId}}" data-origin="{{origin}}">
        <main>
        <h1>Approve a login</h1>
        {{> notices}}
        <dl id="request" hidden>
        <dt>Server</dt><dd id="host"></dd>
        <dt>Service</dt><dd id="service"></dd>
        <dt>Login name</dt><dd id="login"></dd>
        <dt>From</dt><dd id="remote"></dd>
        <dt>Asked at</dt><dd id="time"></dd>
        </dl>
        <form id="decide" hidden>
        <label for="account">Account</label>
        <select id="account" name="account"></select>
        <label for="code">Code shown on the server</label>
        <input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" maxlength="6" pattern="[0-9]{6}" required>
        <label for="pin">PIN</label>
        <input id="pin" name="pin" type="password" inputmode="numeric" autocomplete="off" maxlength="64" required>
        <div class="buttons">
        <button id="approve" type="submit">Approve</button>
        <button id="deny" type="button" class="secondary">Deny</button>
        </div>
        </form>
        {{> foot}}
        """

    static let account = """
        {{> head}}
        <title>Your XignIn account</title>
        </head>
        <body data-page="account" data-rp-id="{{rpId}}" data-origin="{{origin}}">
        <main>
        <h1>Your XignIn account</h1>
        {{> notices}}
        <form id="signin">
        <label for="account">Account</label>
        <select id="account" name="account"></select>
        <button type="submit">Sign in with your passkey</button>
        </form>
        <section id="waiting" hidden aria-live="polite">
        <h2>Logins waiting for you</h2>
        <ul id="waiting-list"></ul>
        <p id="waiting-empty">None right now; this list updates by itself.</p>
        </section>
        <section id="devices" hidden>
        <h2>Devices</h2>
        <ul id="device-list"></ul>
        </section>
        <form id="revoke" hidden>
        <h2>Remove a device</h2>
        <p id="revoke-what"></p>
        <label for="revoke-pin">Your PIN</label>
        <input id="revoke-pin" name="revoke-pin" type="password" inputmode="numeric" autocomplete="off" maxlength="64" required>
        <div class="buttons">
        <button id="revoke-confirm" type="submit">Remove it</button>
        <button id="revoke-cancel" type="button" class="secondary">Cancel</button>
        </div>
        </form>
        <form id="change-pin" hidden>
        <h2>Change your PIN</h2>
        <label for="current-pin">Current PIN</label>
        <input id="current-pin" name="current-pin" type="password" inputmode="numeric" autocomplete="off" maxlength="64" required>
        <label for="new-pin">New PIN</label>
        <input id="new-pin" name="new-pin" type="password" inputmode="numeric" autocomplete="off" maxlength="64" required>
        <label for="new-pin-again">New PIN again</label>
        <input id="new-pin-again" name="new-pin-again" type="password" inputmode="numeric" autocomplete="off" maxlength="64" required>
        <button id="change-pin-submit" type="submit">Change PIN</button>
        </form>
        {{> foot}}
        """
}
