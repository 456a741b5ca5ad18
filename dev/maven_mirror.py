"""Prints the URL of the repository mirror Maven is configured with here, if any.

sbt must resolve from the same place Maven does: on machines whose Maven goes through a
mirror, Maven Central itself may be unreachable.
"""

import os
import xml.etree.ElementTree as ET


def mirror_url(paths):
    for path in paths:
        if not os.path.isfile(path):
            continue
        root = ET.parse(path).getroot()
        for elem in root.iter():
            if _name(elem) != "mirror":
                continue
            fields = {_name(child): (child.text or "").strip() for child in elem}
            mirror_of = {m.strip() for m in fields.get("mirrorOf", "").split(",")}
            # Only a mirror that stands in for Central counts; Maven's built-in
            # "block plain http" mirror is not a repository.
            if fields.get("blocked") == "true" or not ({"*", "central"} & mirror_of):
                continue
            if fields.get("url"):
                return fields["url"]
    return ""


def _name(elem):
    return elem.tag.split("}")[-1]


if __name__ == "__main__":
    candidates = [os.path.expanduser("~/.m2/settings.xml")]
    if os.environ.get("MAVEN_HOME"):
        candidates.append(os.path.join(os.environ["MAVEN_HOME"], "conf", "settings.xml"))
    candidates.append("/usr/share/maven/conf/settings.xml")
    print(mirror_url(candidates))
