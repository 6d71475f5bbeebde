module fioprobe.local/e2e/pause

go 1.26.0
