"""The data plane: one native thread per Locust process reads every stream's bytes (`loop`), one
keep-alive connection each (`connection`), one request's response into its record (`exchange`)."""
