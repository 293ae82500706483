import SQLKit

/// The schema, as the steps that built it. Written in a dialect SQLite and PostgreSQL both accept
/// (RETURNING, ON CONFLICT, BIGINT times in milliseconds), so one schema serves both.
enum Schema {
    /// Each entry takes the schema from version i to i + 1.
    static let migrations = [
        initial, authentications, merges, pinChecks, hosts, scale, observability, deviceInformation,
        singleUseActivationData,
        confirmationSources, authenticationPurposes, passkeys, offlineLogin, wakeUps, attestation, fingerEnrolment,
        unixIds, console, providerRegistrations, pepperIndex, lateNovemberReview, sessionCovers,
    ]

    /// Session covers (docs/design.md, "An approval covers its session"): each host group's sudo policy per PAM service
    /// (`*` for the rest), and the covers approved SSH logins opened, ended or not.
    static let sessionCovers = [
        """
        CREATE TABLE host_group_sudo_policies (
            group_name TEXT NOT NULL,
            service TEXT NOT NULL,
            policy TEXT NOT NULL,
            PRIMARY KEY (group_name, service)
        )
        """,
        """
        CREATE TABLE session_covers (
            id TEXT PRIMARY KEY,
            confirmation_id TEXT NOT NULL UNIQUE,
            account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
            host_id TEXT NOT NULL REFERENCES hosts(id) ON DELETE CASCADE,
            login_name TEXT NOT NULL,
            audit_session BIGINT NOT NULL,
            created_at BIGINT NOT NULL,
            expires_at BIGINT NOT NULL,
            ended_at BIGINT,
            ended_because TEXT
        )
        """,
        "CREATE INDEX session_covers_account ON session_covers (account_id, ended_at)",
        "CREATE INDEX session_covers_expiry ON session_covers (expires_at)",
    ]

    /// The review of late November 2026 (docs/security.md, H1–H13): the role that locked an account (a helpdesk lifts
    /// only a helpdesk's lock; NULL, as for the locks before, is an administrator's); whether an account may be the hosts'
    /// local user of its login name (H5); what binds a registration through
    /// an identity provider to the person who signs in (the start's code, the browser's cookie, where and when it
    /// started, the account waiting for the code, the client's last wait); and the "not me" links of its notice mail.
    static let lateNovemberReview = [
        "ALTER TABLE accounts ADD COLUMN locked_by_role TEXT",
        // Accounts that had a login name logged in to hosts' local users of that name, whatever their uid: they keep
        // it (an administrator takes it away with set-local-user EMAIL no); new accounts are the manager's own users.
        "ALTER TABLE accounts ADD COLUMN maps_local_user BIGINT NOT NULL DEFAULT 0",
        "UPDATE accounts SET maps_local_user = 1 WHERE login_name IS NOT NULL",
        "ALTER TABLE provider_registrations ADD COLUMN code_hash TEXT",
        "ALTER TABLE provider_registrations ADD COLUMN code_failures BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE provider_registrations ADD COLUMN browser_hash TEXT",
        "ALTER TABLE provider_registrations ADD COLUMN started_from TEXT",
        "ALTER TABLE provider_registrations ADD COLUMN started_at BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE provider_registrations ADD COLUMN account TEXT",
        "ALTER TABLE provider_registrations ADD COLUMN last_waited_at BIGINT NOT NULL DEFAULT 0",
        "CREATE INDEX provider_registrations_browser ON provider_registrations (browser_hash)",
        """
        CREATE TABLE activation_cancellations (
            token_hash TEXT PRIMARY KEY,
            activation_id TEXT NOT NULL,
            expires_at BIGINT NOT NULL
        )
        """,
    ]

    /// Which PIN peppers the verifiers use, asked at every start (an instance, an admin command): without an index it
    /// read every activation, a third of a second at a million.
    static let pepperIndex = ["CREATE INDEX activations_pin_pepper ON activations (pin_pepper)"]

    /// Registrations through an identity provider, between the client's start and the provider's answer: the
    /// state's hash (the browser brings the state back), the OpenID nonce and the PKCE verifier, the activation PIN's
    /// verifier made at the start, and then the outcome, with the activation data sealed until the client takes it.
    static let providerRegistrations = [
        """
        CREATE TABLE provider_registrations (
            id TEXT PRIMARY KEY,
            provider TEXT NOT NULL,
            state_hash TEXT NOT NULL UNIQUE,
            oidc_nonce TEXT NOT NULL,
            code_verifier TEXT NOT NULL,
            alias TEXT,
            pin_salt TEXT NOT NULL,
            pin_verifier TEXT NOT NULL,
            pin_iterations BIGINT NOT NULL,
            pin_pepper TEXT NOT NULL,
            wait_token_hash TEXT NOT NULL,
            in_browser BIGINT NOT NULL,
            custom_step TEXT,
            outcome TEXT NOT NULL,
            message TEXT,
            email TEXT,
            login_name TEXT,
            activation TEXT,
            expires_at BIGINT NOT NULL
        )
        """
    ]

    /// The administrator's console: an account's role (`admin`, `helpdesk`, NULL for none), the lock an
    /// administrator puts on an account (when, and who), and the console's sessions, apart from the account page's so
    /// that no read-only session ever opens the console.
    static let console = [
        "ALTER TABLE accounts ADD COLUMN role TEXT",
        "ALTER TABLE accounts ADD COLUMN locked_at BIGINT",
        "ALTER TABLE accounts ADD COLUMN locked_by TEXT",
        """
        CREATE TABLE console_sessions (
            token_hash TEXT PRIMARY KEY,
            device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
            expires_at BIGINT NOT NULL
        )
        """,
    ]

    /// Users on every machine: an account's uid (its private group's gid is the same number), given when it first
    /// has a login name, from a counter that only grows, so a number is never given twice; and the local groups a
    /// host group's members join on its hosts. Accounts that had a login name before get theirs now, in the order
    /// they were made, from the start of the standard range (UnixIdRange.standard; the literal is this step's own). The
    /// counter holds the next number to give, 0 while none was.
    static let unixIds = [
        "ALTER TABLE accounts ADD COLUMN uid BIGINT",
        "CREATE UNIQUE INDEX accounts_uid ON accounts (uid)",
        """
        UPDATE accounts SET uid = 1879048191 + (
            SELECT r.n FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY created_at, id) AS n FROM accounts WHERE login_name IS NOT NULL) r
            WHERE r.id = accounts.id)
        WHERE login_name IS NOT NULL
        """,
        "CREATE TABLE unix_id_counter (next_id BIGINT NOT NULL)",
        """
        INSERT INTO unix_id_counter (next_id)
        SELECT CASE WHEN COUNT(*) = 0 THEN 0 ELSE 1879048192 + COUNT(*) END FROM accounts WHERE login_name IS NOT NULL
        """,
        """
        CREATE TABLE host_group_local_groups (
            group_name TEXT NOT NULL,
            local_group TEXT NOT NULL,
            PRIMARY KEY (group_name, local_group)
        )
        """,
    ]

    /// The digest of the user's enrolled fingers a device's biometric factor was added with (NULL: not bound).
    static let fingerEnrolment = ["ALTER TABLE devices ADD COLUMN biometric_enrolment TEXT"]

    /// TPM key attestation: what a device's or host's key was proven to be (the EK certificate's issuer) or why it
    /// was not, and the credentials handed out and not yet answered (one per personalization session or join token).
    static let attestation = [
        "ALTER TABLE devices ADD COLUMN ek_issuer TEXT",
        "ALTER TABLE devices ADD COLUMN unattested_because TEXT",
        "ALTER TABLE hosts ADD COLUMN ek_issuer TEXT",
        "ALTER TABLE hosts ADD COLUMN unattested_because TEXT",
        """
        CREATE TABLE attestation_challenges (
            id TEXT PRIMARY KEY,
            purpose TEXT NOT NULL UNIQUE,
            secret_hash TEXT NOT NULL,
            attestation_key TEXT NOT NULL,
            ek_issuer TEXT NOT NULL,
            expires_at BIGINT NOT NULL
        )
        """,
    ]

    /// When a confirmation was last started or decided, so a sweep finds the changes other instances made whose
    /// notification was lost (IdentityManager+WakeUps).
    static let wakeUps = [
        "ALTER TABLE confirmations ADD COLUMN changed_at BIGINT NOT NULL DEFAULT 0",
        "CREATE INDEX confirmations_changed ON confirmations (changed_at)",
    ]

    /// Offline login: a PIN generation that every PIN change moves (a device's offline verifier of another one is
    /// deleted), the last offline event recorded per device (reports are idempotent), and an account's own policy
    /// (NULL: the manager's).
    static let offlineLogin = [
        "ALTER TABLE activations ADD COLUMN pin_generation BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE devices ADD COLUMN offline_reported_through BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE accounts ADD COLUMN offline_grace BIGINT",
        "ALTER TABLE accounts ADD COLUMN offline_max_failures BIGINT",
    ]

    /// A browser's passkey is a device too: its WebAuthn credential id (unique across devices, so one passkey cannot
    /// enrol twice), its authenticator's model (AAGUID), the signature counter, and whether it may be or is copied
    /// to the user's other devices (a synced passkey).
    static let passkeys = [
        "ALTER TABLE devices ADD COLUMN credential_id TEXT",
        "ALTER TABLE devices ADD COLUMN aaguid TEXT",
        "ALTER TABLE devices ADD COLUMN sign_count BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE devices ADD COLUMN backup_eligible BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE devices ADD COLUMN backed_up BIGINT NOT NULL DEFAULT 0",
        "CREATE UNIQUE INDEX devices_credential ON devices (credential_id)",
        // A browser signed in with its passkey reads its account's waiting logins and devices for a few minutes.
        """
        CREATE TABLE web_sessions (
            token_hash TEXT PRIMARY KEY,
            device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
            expires_at BIGINT NOT NULL
        )
        """,
    ]

    /// One column says what an authentication is for (AuthenticationPurpose, as JSON), instead of a service name that
    /// meant a process and two optional ids. Rows in flight keep their meaning.
    static let authenticationPurposes = [
        "ALTER TABLE authentications ADD COLUMN purpose TEXT NOT NULL DEFAULT ''",
        """
        UPDATE authentications SET purpose = CASE
            WHEN merge_session_id IS NOT NULL THEN '{"merge":{"sessionId":"' || merge_session_id || '"}}'
            WHEN confirmation_id IS NOT NULL THEN '{"confirmation":{"id":"' || confirmation_id || '"}}'
            WHEN service = 'change-pin' THEN '{"apiAccess":{"process":"changePin"}}'
            WHEN service = 'new-activation' THEN '{"apiAccess":{"process":"requestNewActivation"}}'
            WHEN service = 'delete' THEN '{"apiAccess":{"process":"delete"}}'
            WHEN service = 'add-factor' THEN '{"apiAccess":{"process":"addFactor"}}'
            ELSE '{"login":{"service":"' || service || '"}}'
        END
        """,
        "ALTER TABLE authentications DROP COLUMN service",
        "ALTER TABLE authentications DROP COLUMN merge_session_id",
        "ALTER TABLE authentications DROP COLUMN confirmation_id",
    ]

    /// Login confirmations count per source (the host and the remote address it reports) and cool down per source,
    /// so nobody can fill or freeze another's queue; when a device opened one is kept, so a newer request displaces
    /// only one nobody looked at.
    static let confirmationSources = [
        "ALTER TABLE confirmations ADD COLUMN source TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE confirmations ADD COLUMN opened_at BIGINT",
        "CREATE INDEX confirmations_pending ON confirmations (account_id, state, expires_at)",
        """
        CREATE TABLE confirmation_cooldowns (
            account_id TEXT NOT NULL,
            source TEXT NOT NULL,
            blocked_until BIGINT NOT NULL,
            PRIMARY KEY (account_id, source)
        )
        """,
        "CREATE INDEX confirmation_cooldowns_expiry ON confirmation_cooldowns (blocked_until)",
    ]
    static var version: Int { migrations.count }

    /// Activation data is single-use and expires: until when its secret opens the activation (0: used or withdrawn).
    /// Data that waited for its first personalization gets a week from its making; used data is void.
    static let singleUseActivationData = [
        "ALTER TABLE activations ADD COLUMN secret_valid_until BIGINT NOT NULL DEFAULT 0",
        "UPDATE activations SET secret_valid_until = created_at + 604800000 WHERE ever_personalized = 0",
    ]

    /// Device information (Nevis): when each device last authenticated, and the factors it enrolled beyond device and PIN.
    static let deviceInformation = [
        "ALTER TABLE devices ADD COLUMN last_used_at BIGINT",
        "ALTER TABLE devices ADD COLUMN factors TEXT NOT NULL DEFAULT ''",
    ]

    /// Which pepper keys each PIN verifier, and the audit of security events (kept `audit.keep`, then deleted).
    static let observability = [
        "ALTER TABLE activations ADD COLUMN pin_pepper TEXT NOT NULL DEFAULT 'file'",
        """
        CREATE TABLE audit_events (
            id TEXT PRIMARY KEY,
            at BIGINT NOT NULL,
            event TEXT NOT NULL,
            email TEXT,
            activation_id TEXT,
            host TEXT,
            service TEXT,
            detail TEXT,
            actor TEXT NOT NULL
        )
        """,
        "CREATE INDEX audit_events_at ON audit_events (at)",
    ]

    /// Several instances on one database: the mail queue and the rate limits are rows; expired rows are found by index.
    static let scale = [
        """
        CREATE TABLE mail_queue (
            id TEXT PRIMARY KEY,
            recipient TEXT NOT NULL,
            message TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            claimed_until BIGINT NOT NULL,
            attempts BIGINT NOT NULL
        )
        """,
        "CREATE INDEX mail_queue_due ON mail_queue (claimed_until, created_at)",
        "CREATE TABLE rate_limits (key TEXT PRIMARY KEY, window_start BIGINT NOT NULL, count BIGINT NOT NULL)",
        // Which instance holds a PIN check's claim, so a restarted instance can settle the claims it left.
        "ALTER TABLE activations ADD COLUMN pin_check_by TEXT",
        "CREATE INDEX authentications_expiry ON authentications (expires_at)",
        "CREATE INDEX personalization_sessions_expiry ON personalization_sessions (expires_at)",
        "CREATE INDEX confirmations_expiry ON confirmations (expires_at)",
        "CREATE INDEX device_challenges_expiry ON device_challenges (expires_at)",
        "CREATE INDEX host_challenges_expiry ON host_challenges (expires_at)",
    ]

    /// Servers that ask for login confirmations (hosts), their join tokens and challenges, the confirmations, and login names.
    static let hosts = [
        """
        CREATE TABLE hosts (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            public_key TEXT NOT NULL,
            key_kind TEXT NOT NULL,
            created_at BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE host_join_tokens (
            token_hash TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            expires_at BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE host_challenges (
            challenge TEXT PRIMARY KEY,
            host_id TEXT NOT NULL REFERENCES hosts(id) ON DELETE CASCADE,
            expires_at BIGINT NOT NULL
        )
        """,
        "ALTER TABLE accounts ADD COLUMN login_name TEXT",
        "CREATE UNIQUE INDEX accounts_login_name ON accounts (login_name)",
        // After a denial no new confirmation is started for the account until then (push bombing).
        "ALTER TABLE accounts ADD COLUMN confirmations_blocked_until BIGINT NOT NULL DEFAULT 0",
        """
        CREATE TABLE confirmations (
            id TEXT PRIMARY KEY,
            host_id TEXT NOT NULL REFERENCES hosts(id) ON DELETE CASCADE,
            account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
            login_name TEXT NOT NULL,
            service TEXT NOT NULL,
            remote_host TEXT,
            tty TEXT,
            command TEXT,
            nonce TEXT NOT NULL,
            wait_token_hash TEXT NOT NULL,
            code TEXT NOT NULL,
            code_failures BIGINT NOT NULL,
            state TEXT NOT NULL,
            approved_by TEXT,
            created_at BIGINT NOT NULL,
            expires_at BIGINT NOT NULL
        )
        """,
        "CREATE INDEX confirmations_account ON confirmations (account_id, state)",
        // Which hosts an account may log in to: none listed means any; else a host that shares a group.
        "CREATE TABLE host_groups (host_name TEXT NOT NULL, group_name TEXT NOT NULL, PRIMARY KEY (host_name, group_name))",
        """
        CREATE TABLE account_host_groups (
            account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
            group_name TEXT NOT NULL,
            PRIMARY KEY (account_id, group_name)
        )
        """,
        "ALTER TABLE authentications ADD COLUMN confirmation_id TEXT",
    ]

    /// PIN checks of one activation run one at a time; the claim is a row value, so it holds across instances.
    static let pinChecks = [
        "ALTER TABLE activations ADD COLUMN pin_check_until BIGINT NOT NULL DEFAULT 0"
    ]

    /// Organization-invite merges: more addresses per account, and which device may confirm a merge.
    static let merges = [
        """
        CREATE TABLE account_emails (
            email TEXT PRIMARY KEY,
            account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE
        )
        """,
        "ALTER TABLE personalization_sessions ADD COLUMN merge_device_id TEXT",
        "ALTER TABLE authentications ADD COLUMN merge_session_id TEXT",
    ]

    static let authentications = [
        """
        CREATE TABLE authentications (
            id TEXT PRIMARY KEY,
            device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
            activation_id TEXT NOT NULL REFERENCES activations(id) ON DELETE CASCADE,
            service TEXT NOT NULL,
            host TEXT NOT NULL,
            local_user TEXT NOT NULL,
            challenge TEXT,
            expires_at BIGINT NOT NULL,
            role TEXT,
            code TEXT UNIQUE,
            code_expires_at BIGINT,
            attributes TEXT
        )
        """
    ]

    static let initial = [
        """
        CREATE TABLE accounts (
            id TEXT PRIMARY KEY,
            email TEXT NOT NULL UNIQUE,
            attributes TEXT NOT NULL,
            arbitrary_attributes TEXT,
            service_mapping_id TEXT,
            organization TEXT,
            is_temporary BIGINT NOT NULL,
            created_at BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE activations (
            id TEXT PRIMARY KEY,
            account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
            alias TEXT NOT NULL,
            secret_hash TEXT NOT NULL,
            pin_salt TEXT NOT NULL,
            pin_verifier TEXT NOT NULL,
            pin_iterations BIGINT NOT NULL,
            state TEXT NOT NULL,
            device_id TEXT,
            ever_personalized BIGINT NOT NULL,
            failed_attempts BIGINT NOT NULL,
            locked_until BIGINT NOT NULL,
            permanently_locked BIGINT NOT NULL,
            created_at BIGINT NOT NULL
        )
        """,
        "CREATE INDEX activations_account ON activations (account_id)",
        """
        CREATE TABLE devices (
            id TEXT PRIMARY KEY,
            activation_id TEXT NOT NULL REFERENCES activations(id) ON DELETE CASCADE,
            public_key TEXT NOT NULL,
            key_kind TEXT NOT NULL,
            name TEXT NOT NULL,
            platform TEXT NOT NULL,
            revoked BIGINT NOT NULL,
            created_at BIGINT NOT NULL
        )
        """,
        "CREATE INDEX devices_activation ON devices (activation_id)",
        """
        CREATE TABLE personalization_sessions (
            id TEXT PRIMARY KEY,
            activation_id TEXT NOT NULL REFERENCES activations(id) ON DELETE CASCADE,
            outcome TEXT NOT NULL,
            challenge TEXT NOT NULL,
            expires_at BIGINT NOT NULL
        )
        """,
        "CREATE TABLE manager_settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """
        CREATE TABLE device_challenges (
            challenge TEXT PRIMARY KEY,
            device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
            expires_at BIGINT NOT NULL
        )
        """,
    ]

    /// Brings the schema to `version`, in the caller's transaction; refuses a database newer than this manager.
    static func migrate(_ sql: any SQLDatabase) async throws {
        try await sql.raw("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)").run()
        let current =
            try await sql.raw("SELECT version FROM schema_version").first()
            .map { try $0.decode(column: "version", as: Int.self) } ?? 0
        guard current < version else {
            guard current == version else {
                throw ManagerError.internalFailure(
                    "database schema version \(current) is newer than this manager (\(version)); upgrade xign-manager")
            }
            return
        }
        for step in migrations[current...] {
            for statement in step { try await sql.raw(SQLQueryString(statement)).run() }
        }
        try await sql.raw("DELETE FROM schema_version").run()
        try await sql.raw("INSERT INTO schema_version (version) VALUES (\(bind: version))").run()
    }
}
