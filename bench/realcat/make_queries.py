"""Write queries.jsonl from the hand-written queries below, split into halves by a fixed seed.

Styles: act (an action with its verb: "create a github issue"), intent (what the user wants, not
in the tool's words), terse (a few words), chat (a chatty request with context). Each style's
queries are shuffled by ``random.Random("realcat/<style>")`` and alternately put in half A and B.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

# (style, query, relevant tools as server/tool)
QUERIES: list[tuple[str, str, list[str]]] = [
    # -- act: verb + object ------------------------------------------------------------------
    ("act", "create a github issue", ["github/create_issue"]),
    ("act", "open a pull request", ["github/create_pull_request"]),
    ("act", "list open issues in the repo", ["github/list_issues"]),
    ("act", "update the issue title and labels", ["github/update_issue"]),
    ("act", "comment on issue 42", ["github/add_issue_comment"]),
    ("act", "merge the pull request", ["github/merge_pull_request"]),
    ("act", "fork the repository", ["github/fork_repository"]),
    ("act", "create a new branch on github", ["github/create_branch"]),
    ("act", "search github for repositories about rust parsers", ["github/search_repositories"]),
    ("act", "search code on github for a function name", ["github/search_code"]),
    ("act", "list the commits on main", ["github/list_commits", "git/git_log"]),
    ("act", "list pull requests", ["github/list_pull_requests"]),
    ("act", "review a pull request and approve it", ["github/create_pull_request_review"]),
    ("act", "create a repository", ["github/create_repository"]),
    ("act", "push several files in one commit to github", ["github/push_files"]),
    ("act", "read a file", ["filesystem/read_text_file", "filesystem/read_file"]),
    ("act", "write a file", ["filesystem/write_file"]),
    ("act", "delete an entity from the knowledge graph", ["memory/delete_entities"]),
    ("act", "create entities", ["memory/create_entities"]),
    ("act", "add an observation to an entity", ["memory/add_observations"]),
    ("act", "delete a relation", ["memory/delete_relations"]),
    ("act", "search the knowledge graph", ["memory/search_nodes"]),
    ("act", "move a file to another folder", ["filesystem/move_file"]),
    ("act", "rename a file", ["filesystem/move_file"]),
    ("act", "create a directory", ["filesystem/create_directory"]),
    ("act", "list the directory", ["filesystem/list_directory", "filesystem/list_directory_with_sizes"]),
    ("act", "edit a file", ["filesystem/edit_file"]),
    ("act", "search for files matching *.py", ["filesystem/search_files"]),
    ("act", "click the submit button", ["playwright/browser_click", "puppeteer/puppeteer_click"]),
    ("act", "navigate to example.com", ["playwright/browser_navigate", "puppeteer/puppeteer_navigate"]),
    (
        "act",
        "take a screenshot of the page",
        ["playwright/browser_take_screenshot", "puppeteer/puppeteer_screenshot"],
    ),
    ("act", "fill in the login form", ["playwright/browser_fill_form", "puppeteer/puppeteer_fill"]),
    ("act", "hover over the menu", ["playwright/browser_hover", "puppeteer/puppeteer_hover"]),
    ("act", "press Enter", ["playwright/browser_press_key"]),
    ("act", "go back to the previous page", ["playwright/browser_navigate_back"]),
    ("act", "close the browser", ["playwright/browser_close"]),
    ("act", "resize the browser window to 1280x720", ["playwright/browser_resize"]),
    ("act", "upload a file to the page", ["playwright/browser_file_upload"]),
    ("act", "drag the card to the done column", ["playwright/browser_drag"]),
    ("act", "open a new tab", ["playwright/browser_tabs"]),
    ("act", "commit the staged changes", ["git/git_commit"]),
    ("act", "stage the file", ["git/git_add"]),
    ("act", "unstage everything", ["git/git_reset"]),
    ("act", "diff two branches", ["git/git_diff"]),
    ("act", "checkout the develop branch", ["git/git_checkout"]),
    ("act", "create a local git branch", ["git/git_create_branch"]),
    ("act", "show the commit log", ["git/git_log"]),
    ("act", "convert 3pm Tokyo time to New York", ["time/convert_time"]),
    ("act", "fetch a URL", ["fetch/fetch"]),
    ("act", "download a web page", ["fetch/fetch"]),
    ("act", "get the current time in Berlin", ["time/get_current_time"]),
    ("act", "get the pull request's changed files", ["github/get_pull_request_files"]),
    # -- intent: without the tool's words ------------------------------------------------------
    ("intent", "remember a fact about the user", ["memory/create_entities", "memory/add_observations"]),
    ("intent", "note that Alice prefers dark mode", ["memory/add_observations", "memory/create_entities"]),
    (
        "intent",
        "what do you know about me",
        ["memory/read_graph", "memory/search_nodes", "memory/open_nodes"],
    ),
    (
        "intent",
        "forget what you stored about my old job",
        ["memory/delete_observations", "memory/delete_entities"],
    ),
    ("intent", "record that Bob works at Acme", ["memory/create_relations", "memory/create_entities"]),
    ("intent", "recall everything saved in long-term memory", ["memory/read_graph"]),
    ("intent", "look up what I told you about my project", ["memory/search_nodes", "memory/open_nodes"]),
    ("intent", "think this problem through step by step", ["sequential-thinking/sequentialthinking"]),
    (
        "intent",
        "break a hard problem into steps and revise my reasoning",
        ["sequential-thinking/sequentialthinking"],
    ),
    ("intent", "report a bug to the maintainers", ["github/create_issue"]),
    ("intent", "propose my changes for review upstream", ["github/create_pull_request"]),
    ("intent", "did the CI checks pass on my PR", ["github/get_pull_request_status"]),
    ("intent", "who is the user octocat on github", ["github/search_users"]),
    ("intent", "copy someone's repo into my account", ["github/fork_repository"]),
    (
        "intent",
        "what did reviewers say on the PR",
        ["github/get_pull_request_comments", "github/get_pull_request_reviews"],
    ),
    ("intent", "bring my PR branch up to date with main", ["github/update_pull_request_branch"]),
    ("intent", "close issue 17 as done", ["github/update_issue"]),
    ("intent", "see the README of a repo on github", ["github/get_file_contents"]),
    (
        "intent",
        "what's in this folder",
        ["filesystem/list_directory", "filesystem/list_directory_with_sizes", "filesystem/directory_tree"],
    ),
    (
        "intent",
        "how big are the files here",
        ["filesystem/list_directory_with_sizes", "filesystem/get_file_info"],
    ),
    ("intent", "when was this file last modified", ["filesystem/get_file_info"]),
    ("intent", "which folders am I allowed to touch", ["filesystem/list_allowed_directories"]),
    ("intent", "show the whole project layout as a tree", ["filesystem/directory_tree"]),
    ("intent", "save this text to notes.txt", ["filesystem/write_file"]),
    ("intent", "replace a line in config.yaml", ["filesystem/edit_file"]),
    ("intent", "open several source files at once", ["filesystem/read_multiple_files"]),
    ("intent", "view an image file from disk", ["filesystem/read_media_file"]),
    (
        "intent",
        "what changed since my last commit",
        ["git/git_diff_unstaged", "git/git_status", "git/git_diff"],
    ),
    ("intent", "which files are modified in my working copy", ["git/git_status"]),
    ("intent", "what am I about to commit", ["git/git_diff_staged"]),
    ("intent", "what branches exist locally", ["git/git_branch"]),
    ("intent", "save my work to version control", ["git/git_commit"]),
    ("intent", "what did commit abc123 change", ["git/git_show"]),
    ("intent", "read the article at this link", ["fetch/fetch"]),
    ("intent", "grab the html of a website", ["fetch/fetch"]),
    ("intent", "what time is it in Sydney", ["time/get_current_time"]),
    ("intent", "what hour will it be in London when it's 9am in LA", ["time/convert_time"]),
    ("intent", "run javascript in the page", ["playwright/browser_evaluate", "puppeteer/puppeteer_evaluate"]),
    (
        "intent",
        "pick a country from the dropdown",
        ["playwright/browser_select_option", "puppeteer/puppeteer_select"],
    ),
    ("intent", "what did the page log to the console", ["playwright/browser_console_messages"]),
    ("intent", "which API calls did the page make", ["playwright/browser_network_requests"]),
    ("intent", "accept the alert popup", ["playwright/browser_handle_dialog"]),
    ("intent", "wait until the text Loaded appears", ["playwright/browser_wait_for"]),
    ("intent", "switch the page to dark mode", ["playwright/browser_emulate_media"]),
    ("intent", "find the word checkout on the current page", ["playwright/browser_find"]),
    ("intent", "get the page structure to decide what to click", ["playwright/browser_snapshot"]),
    ("intent", "type my email into the search box", ["playwright/browser_type", "puppeteer/puppeteer_fill"]),
    ("intent", "add two numbers", ["everything/get-sum"]),
    ("intent", "say it back to me", ["everything/echo"]),
    ("intent", "print the server's environment variables", ["everything/get-env"]),
    ("intent", "compress a file with gzip", ["everything/gzip-file-as-resource"]),
    # -- terse ------------------------------------------------------------------------------------
    ("terse", "new issue", ["github/create_issue"]),
    ("terse", "issue details", ["github/get_issue"]),
    ("terse", "pr diff", ["github/get_pull_request_files"]),
    ("terse", "git status", ["git/git_status"]),
    ("terse", "staged diff", ["git/git_diff_staged"]),
    ("terse", "git log", ["git/git_log"]),
    ("terse", "mkdir", ["filesystem/create_directory"]),
    ("terse", "ls", ["filesystem/list_directory"]),
    ("terse", "cat file", ["filesystem/read_text_file", "filesystem/read_file"]),
    ("terse", "file metadata", ["filesystem/get_file_info"]),
    ("terse", "screenshot", ["playwright/browser_take_screenshot", "puppeteer/puppeteer_screenshot"]),
    ("terse", "timezone conversion", ["time/convert_time"]),
    ("terse", "current time", ["time/get_current_time"]),
    ("terse", "web page to markdown", ["fetch/fetch"]),
    ("terse", "knowledge graph", ["memory/read_graph"]),
    ("terse", "browser tabs", ["playwright/browser_tabs"]),
    ("terse", "keyboard", ["playwright/browser_press_key"]),
    ("terse", "sum", ["everything/get-sum"]),
    ("terse", "merge PR", ["github/merge_pull_request"]),
    ("terse", "user memory", ["memory/read_graph", "memory/search_nodes"]),
    # -- chat: chatty, with context ----------------------------------------------------------------
    (
        "chat",
        "hey, can you file a ticket on our repo saying the login page crashes on Safari?",
        ["github/create_issue"],
    ),
    (
        "chat",
        "I just pushed a fix, could you open a PR from fix-login into main for me",
        ["github/create_pull_request"],
    ),
    (
        "chat",
        "please go to the docs site and tell me what the install section says",
        ["fetch/fetch", "playwright/browser_navigate", "puppeteer/puppeteer_navigate"],
    ),
    (
        "chat",
        "could you jot down that my daughter's birthday is in May so you don't forget",
        ["memory/create_entities", "memory/add_observations"],
    ),
    (
        "chat",
        "I think I told you about my dietary restrictions before, what were they?",
        ["memory/search_nodes", "memory/open_nodes"],
    ),
    (
        "chat",
        "before we start, check which files I've changed and haven't committed yet",
        ["git/git_status", "git/git_diff_unstaged"],
    ),
    ("chat", "ok looks good, commit it with the message 'fix typo'", ["git/git_commit"]),
    ("chat", "I want to see the last ten commits on this branch", ["git/git_log", "github/list_commits"]),
    (
        "chat",
        "can you put all the logs into a new folder called archive",
        ["filesystem/create_directory", "filesystem/move_file"],
    ),
    ("chat", "please rewrite the whole contents of settings.json with this", ["filesystem/write_file"]),
    ("chat", "find every markdown file under docs for me", ["filesystem/search_files"]),
    (
        "chat",
        "log into the dashboard with my username and password",
        ["playwright/browser_fill_form", "puppeteer/puppeteer_fill", "playwright/browser_type"],
    ),
    (
        "chat",
        "could you scroll down and click on the 'Load more' link",
        ["playwright/browser_click", "puppeteer/puppeteer_click"],
    ),
    (
        "chat",
        "I need a picture of how the homepage looks right now",
        ["playwright/browser_take_screenshot", "puppeteer/puppeteer_screenshot"],
    ),
    (
        "chat",
        "is there already an issue about memory leaks in that project?",
        ["github/search_issues", "github/list_issues"],
    ),
    (
        "chat",
        "what's the time difference between Paris and Singapore right now",
        ["time/convert_time", "time/get_current_time"],
    ),
    (
        "chat",
        "my teammate asked for a review on PR 88, leave comments requesting changes",
        ["github/create_pull_request_review"],
    ),
    ("chat", "let's start a fresh project repo on github called notes-app", ["github/create_repository"]),
    ("chat", "wipe everything you remember about the Acme project entity", ["memory/delete_entities"]),
    ("chat", "link Alice to Bob as her manager in your memory", ["memory/create_relations"]),
    ("chat", "switch over to the release branch please", ["git/git_checkout"]),
    ("chat", "pull down the JSON from this API endpoint and show me", ["fetch/fetch"]),
]


def main() -> None:
    here = Path(__file__).resolve().parent
    tools = {
        json.loads(line)["server"] + "/" + json.loads(line)["tool"] for line in (here / "tools.jsonl").open()
    }
    rows: list[tuple[str, int, dict[str, object]]] = []
    for style in dict.fromkeys(style for style, _, _ in QUERIES):
        mine = [(text, relevant) for s, text, relevant in QUERIES if s == style]
        order = list(range(len(mine)))
        random.Random(f"realcat/{style}").shuffle(order)
        for position, i in enumerate(order):
            text, relevant = mine[i]
            unknown = set(relevant) - tools
            assert not unknown, (text, unknown)
            rows.append(
                (
                    style,
                    i,
                    {
                        "id": f"rc-{style}-{i}",
                        "query": text,
                        "relevant": relevant,
                        "relevant_servers": sorted({r.split("/", 1)[0] for r in relevant}),
                        "meta": {"style": style, "half": "AB"[position % 2]},
                    },
                )
            )
    rows.sort(key=lambda row: row[:2])
    with (here / "queries.jsonl").open("w") as out:
        for _, _, row in rows:
            out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
