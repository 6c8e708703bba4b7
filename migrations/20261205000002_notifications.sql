-- Alerts that reach a person (issue 28): a brand's notification channels, the alert items
-- open now (one message when an item opens, one when it resolves), and the messages waiting
-- for delivery, retried with backoff until their channel takes them.
CREATE TABLE notification_channels (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    brand_id           uuid NOT NULL REFERENCES brands (id) ON DELETE CASCADE,
    name               text NOT NULL,
    kind               text NOT NULL CHECK (kind IN ('webhook', 'slack')),
    url                text NOT NULL,
    -- A webhook's signing secret (kept to sign each delivery; shown once, at creation).
    secret             text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    created_by         text NOT NULL,
    last_delivered_at  timestamptz,
    failing_since      timestamptz,
    last_error         text,
    UNIQUE (brand_id, name)
);

CREATE TABLE alert_items (
    key        text PRIMARY KEY,
    brand_id   uuid NOT NULL REFERENCES brands (id) ON DELETE CASCADE,
    kind       text NOT NULL,
    subject    jsonb NOT NULL,
    opened_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE notification_outbox (
    id               bigserial PRIMARY KEY,
    channel_id       uuid NOT NULL REFERENCES notification_channels (id) ON DELETE CASCADE,
    event            text NOT NULL CHECK (event IN ('firing', 'resolved', 'test')),
    item_key         text NOT NULL,
    payload          jsonb NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    last_error       text
);
CREATE INDEX notification_outbox_pending ON notification_outbox (channel_id, id)
    WHERE delivered_at IS NULL;
CREATE INDEX notification_outbox_delivered ON notification_outbox (delivered_at)
    WHERE delivered_at IS NOT NULL;
