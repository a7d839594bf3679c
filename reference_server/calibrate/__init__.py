"""Profiles fitted to measurement: `llmchaos calibrate` (cli), the engine in virtual time (virtual),
load levels and their statistics (level), published curves (curves), a user's runs (runs), the fit."""
