-- Fleet scale (issue 14): room in every page for the rows rewritten all the time — a
-- runner's registry row at each plan fetch, a branch rule at each claim and report — so the
-- new version stays on its page and no index is written (HOT). Applies to pages written from
-- now on; a live database needs no rewrite.
ALTER TABLE runners SET (fillfactor = 70);
ALTER TABLE branch_rules SET (fillfactor = 80);
