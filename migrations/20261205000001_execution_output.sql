-- What a run's programs printed (issue 28): the last bytes of each stream of each node run,
-- as the runner reported them. Kept as long as its execution (the retention deletes both).
CREATE TABLE execution_output (
    execution_id  uuid NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    seq           integer NOT NULL,
    node_id       text NOT NULL,
    visit         integer NOT NULL CHECK (visit >= 1),
    stream        text NOT NULL CHECK (stream IN ('stdout', 'stderr')),
    text          text NOT NULL,
    cut_bytes     bigint NOT NULL CHECK (cut_bytes >= 0),
    PRIMARY KEY (execution_id, seq)
);
