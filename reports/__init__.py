"""cpullm's reports: `cpullm report` (reports.report) and scripts/nightly (reports.nightly), both
reading the results database."""
