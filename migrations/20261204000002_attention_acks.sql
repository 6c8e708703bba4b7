-- Acknowledging an attention item (issue 28): who, why and until when. An item is silenced
-- while its latest acknowledgement has not run out and, for a rule flagged as needing
-- attention, was made after the flag (a new flag after a resume is a new item).
CREATE TABLE attention_acks (
    id              bigserial PRIMARY KEY,
    branch_rule_id  uuid NOT NULL REFERENCES branch_rules (id) ON DELETE CASCADE,
    key_id          uuid NOT NULL REFERENCES api_keys (id),
    key_name        text NOT NULL,
    reason          text NOT NULL,
    at              timestamptz NOT NULL DEFAULT now(),
    until           timestamptz NOT NULL CHECK (until > at)
);
CREATE INDEX attention_acks_rule ON attention_acks (branch_rule_id, at DESC);
